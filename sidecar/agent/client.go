package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/patina-dev/patina/sidecar/agent/wire"
	"github.com/patina-dev/patina/sidecar/budget"
	"github.com/patina-dev/patina/sidecar/mux"
)

// ClientConfig configures a Client. Zero values take the defaults noted.
type ClientConfig struct {
	// WorkspaceID and Token are what hello presents; the agent must answer
	// for the same workspace.
	WorkspaceID string
	Token       string
	// Dial opens a connection to the agent. Required.
	Dial func(ctx context.Context) (net.Conn, error)
	// Recover is called when the agent cannot be reached or fails hello
	// (before any call was sent, so retrying is safe): it starts the agent
	// again. The connection is then tried until RecoverTimeout passes.
	Recover func(ctx context.Context, cause error) error
	// RecoverTimeout bounds waiting for a recovered agent (default 15 s).
	RecoverTimeout time.Duration
	// OutputLimit is the sidecar's head/tail limit: results with more are
	// refused (default 1 MiB).
	OutputLimit int
	// CallTimeout bounds calls that should be quick (default 30 s).
	CallTimeout time.Duration
	// HelloTimeout bounds dialing and hello (default 5 s).
	HelloTimeout time.Duration
	// KeepAlive is the connection's ping interval (default 10 s).
	KeepAlive time.Duration
	// Budget, if set, is the sidecar's memory budget: an exec answer's
	// output is read only once its bytes are taken from it (waiting, within
	// the caller's deadline, while it is spent) and held until the
	// Result's Release; the connection's stream windows grow from it.
	// The client's answers hold at most a share of it at once (see
	// shareOf): a lying agent spends only its own workspace's share.
	Budget Budget
	// Setup, if set, gives what each new connection's agent is told after
	// hello, before any other call (nil: nothing). A setup that fails is
	// logged; the connection is used all the same.
	Setup func() *wire.SetupRequest
	// OldAgent: the workspace's container was made by an earlier patina
	// release, whose agent may speak wire.OldProtocol; it is then spoken to in
	// that protocol (compat.go). An agent of a container this release made
	// that answers with OldProtocol is refused.
	OldAgent bool
	Logger   *slog.Logger
}

// ErrUnavailable: the agent cannot be reached, or answered something that
// is not a valid answer. Only its workspace is affected.
var ErrUnavailable = errors.New("workspace agent unavailable")

// Budget is memory shared by the whole sidecar (budget.Budget).
type Budget interface {
	Acquire(ctx context.Context, n int64) error
	TryAcquireSpare(n int64) bool
	Release(n int64)
	Size() int64
}

// Client talks to one workspace's agent over one multiplexed connection,
// dialled on first use and again after it breaks.
type Client struct {
	cfg ClientConfig
	log *slog.Logger

	// sem is held while connecting (a lock that honours contexts: one
	// caller recovering the agent never holds others past their deadline).
	sem   chan struct{}
	mu    sync.Mutex
	conn  *mux.Conn
	hello wire.Hello
	// noPipes: the agent did not take pipes (dial).
	noPipes atomic.Bool
	// share is the part of the budget this client's exec answers may
	// hold at once (made on first use, from the budget's size).
	share func() *budget.Budget
}

// NewClient returns a client; nothing is dialled yet.
func NewClient(cfg ClientConfig) *Client {
	if cfg.OutputLimit <= 0 {
		cfg.OutputLimit = 1 << 20
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 30 * time.Second
	}
	if cfg.HelloTimeout <= 0 {
		cfg.HelloTimeout = 5 * time.Second
	}
	if cfg.RecoverTimeout <= 0 {
		cfg.RecoverTimeout = 15 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Client{cfg: cfg, sem: make(chan struct{}, 1), log: cfg.Logger.With("component", "agent-client", "workspace_id", cfg.WorkspaceID)}
	c.share = sync.OnceValue(func() *budget.Budget { return budget.New(shareOf(c.cfg.Budget.Size(), c.cfg.OutputLimit)) })
	return c
}

// Close closes the connection (the agent and its sessions keep running).
func (c *Client) Close() {
	c.mu.Lock()
	conn := c.conn
	c.conn = nil
	c.mu.Unlock()
	if conn != nil {
		conn.Close()
	}
}

// Connected reports whether a connection is up now.
func (c *Client) Connected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conn != nil && c.conn.Err() == nil
}

// ConnectWait waits up to d for an agent just started to answer (without
// recovering: it is expected to come up by itself).
func (c *Client) ConnectWait(ctx context.Context, d time.Duration) (wire.Hello, error) {
	if _, h, ok := c.live(); ok {
		return h, nil
	}
	select {
	case c.sem <- struct{}{}:
		defer func() { <-c.sem }()
	case <-ctx.Done():
		return wire.Hello{}, ctx.Err()
	}
	conn, h, err := c.dialUntil(ctx, time.Now().Add(d))
	if err != nil {
		return wire.Hello{}, err
	}
	c.mu.Lock()
	c.conn, c.hello = conn, h
	c.mu.Unlock()
	return h, nil
}

// Done is closed when the current connection closes; nil when there is
// none.
func (c *Client) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		return nil
	}
	return c.conn.Done()
}

// Connect makes sure a connection is up (dialling, and recovering once,
// as needed) and returns the agent's hello.
func (c *Client) Connect(ctx context.Context) (wire.Hello, error) {
	_, h, err := c.connection(ctx)
	return h, err
}

// connection returns the live connection, making one if needed.
func (c *Client) connection(ctx context.Context) (*mux.Conn, wire.Hello, error) {
	if conn, h, ok := c.live(); ok {
		return conn, h, nil
	}
	select {
	case c.sem <- struct{}{}:
		defer func() { <-c.sem }()
	case <-ctx.Done():
		return nil, wire.Hello{}, fmt.Errorf("%w: waiting for the connection to the agent: %v", ErrUnavailable, ctx.Err())
	}
	if conn, h, ok := c.live(); ok {
		return conn, h, nil
	}
	conn, h, err := c.dial(ctx)
	if err != nil && c.cfg.Recover != nil && ctx.Err() == nil {
		c.log.Info("agent unreachable; recovering", "err", err)
		if rerr := c.cfg.Recover(ctx, err); rerr != nil {
			return nil, wire.Hello{}, fmt.Errorf("%w (%v); starting it again failed: %v", ErrUnavailable, err, rerr)
		}
		conn, h, err = c.dialUntil(ctx, time.Now().Add(c.cfg.RecoverTimeout))
	}
	if err != nil {
		return nil, wire.Hello{}, err
	}
	c.mu.Lock()
	c.conn, c.hello = conn, h
	c.mu.Unlock()
	return conn, h, nil
}

func (c *Client) live() (*mux.Conn, wire.Hello, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil && c.conn.Err() == nil {
		return c.conn, c.hello, true
	}
	return nil, wire.Hello{}, false
}

// dialUntil dials until it succeeds or the deadline passes, backing off.
func (c *Client) dialUntil(ctx context.Context, deadline time.Time) (*mux.Conn, wire.Hello, error) {
	start := time.Now()
	wait := dialFirst
	for {
		conn, h, err := c.dial(ctx)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return conn, h, err
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
		}
		// An agent just started answers within tens of ms: try every 5 ms
		// for the first 200 (a failed dial costs µs), then back off.
		if time.Since(start) > dialQuickly {
			wait = min(2*wait, dialMaxWait)
		}
	}
}

// dial connects and says hello, within HelloTimeout. On a unix socket it
// moves the connection to pipes first (offerPipes); an agent that does not
// take them (one older than that, whose container still has its binary)
// closes the connection, and is then spoken to on the socket itself, by this
// client from then on.
func (c *Client) dial(ctx context.Context) (*mux.Conn, wire.Hello, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.HelloTimeout)
	defer cancel()
	conn, h, offered, err := c.dialOnce(ctx, !c.noPipes.Load())
	if err != nil && offered && ctx.Err() == nil {
		if conn, h, _, err2 := c.dialOnce(ctx, false); err2 == nil {
			c.noPipes.Store(true)
			c.log.Info("the agent does not take pipes; using its socket", "err", err)
			return conn, h, nil
		}
	}
	return conn, h, err
}

// dialOnce connects (over pipes if pipes and the connection is a unix
// socket: offered) and says hello.
func (c *Client) dialOnce(ctx context.Context, pipes bool) (_ *mux.Conn, _ wire.Hello, offered bool, _ error) {
	nc, err := c.cfg.Dial(ctx)
	if err != nil {
		return nil, wire.Hello{}, false, fmt.Errorf("%w: connect: %v", ErrUnavailable, err)
	}
	if uc, ok := nc.(*net.UnixConn); ok && pipes {
		offered = true
		if nc, err = wire.OfferPipes(uc); err != nil {
			return nil, wire.Hello{}, offered, fmt.Errorf("%w: connect: %v", ErrUnavailable, err)
		}
	}
	mc := mux.Config{MaxStreams: -1, KeepAlive: c.cfg.KeepAlive, Logger: c.log}
	if c.cfg.Budget != nil {
		mc.Budget = c.cfg.Budget
	}
	conn := mux.Client(nc, mc)
	var h wire.Hello
	err = c.roundTrip(ctx, conn, wire.MethodHello, wire.HelloRequest{Token: c.cfg.Token, WorkspaceID: c.cfg.WorkspaceID, Protocol: wire.ProtocolVersion}, &h, 64<<10)
	if err == nil {
		err = validHello(&h, c.cfg.WorkspaceID, c.cfg.OldAgent)
	}
	if err == nil && h.Protocol == wire.OldProtocol {
		conn.UseFullWindows()
	}
	if err != nil {
		conn.Close()
		if !errors.Is(err, ErrUnavailable) {
			err = fmt.Errorf("%w: hello: %v", ErrUnavailable, err)
		}
		return nil, wire.Hello{}, offered, err
	}
	if c.cfg.Setup != nil {
		if req := c.cfg.Setup(); req != nil {
			var res setupResult
			if err := c.roundTrip(ctx, conn, wire.MethodSetup, req, &res, 64<<10); err != nil {
				c.log.Warn("the agent's setup failed: its new shells lack the workspace's environment", "err", err)
			} else if res.Warning != "" {
				c.log.Warn("the agent's setup", "warning", res.Warning)
			}
		}
	}
	return conn, h, offered, nil
}

// reply is an answer being read: its head was decoded; Body reads what
// follows (streaming methods).
type reply struct {
	st   *mux.Stream
	body *bufio.Reader
	stop func() bool
}

// Read reads the answer's body.
func (r *reply) Read(p []byte) (int, error) {
	n, err := r.body.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = fmt.Errorf("%w: reading from the agent: %v", ErrUnavailable, err)
	}
	return n, err
}

// Close ends the call (resetting the stream if the body was not read).
func (r *reply) Close() error {
	r.stop()
	return r.st.Close()
}

// callOpts tune one call.
type callOpts struct {
	body      io.Reader    // request body, if any
	headLimit int          // longest head line accepted (default 1 MiB)
	onID      func(string) // called with a progress id line
	keep      bool         // return the stream for its body
	duplex    bool         // leave the write half open (a tunnel)
	long      bool         // no CallTimeout: the caller's ctx bounds it
	noOutput  bool         // an exec result's output is skipped
	// bigLine is called once the answer's line passes smallLine bytes,
	// before more of it is read (compat.go).
	bigLine func() error
	// ack bounds the wait for the first line of the answer (a long call
	// whose agent acknowledges it at once, like exec).
	ack time.Duration
}

// call runs method with args and decodes the result into out.
func (c *Client) call(ctx context.Context, method string, args, out any, o callOpts) (*reply, error) {
	if !o.long {
		caller := ctx
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.CallTimeout)
		defer cancel()
		r, err := c.callOnce(ctx, method, args, out, o)
		if err != nil && ctx.Err() != nil && caller.Err() == nil {
			err = fmt.Errorf("%w: the agent did not answer %s within %s", ErrUnavailable, method, c.cfg.CallTimeout)
		}
		return r, err
	}
	return c.callOnce(ctx, method, args, out, o)
}

// callOnce is call without its default deadline.
func (c *Client) callOnce(ctx context.Context, method string, args, out any, o callOpts) (*reply, error) {
	for attempt := 0; ; attempt++ {
		conn, _, err := c.connection(ctx)
		if err != nil {
			return nil, notConnectedError{err}
		}
		r, err := c.open(ctx, conn, method, args, out, o)
		// A connection found dead before the call went out (its agent died
		// since the last call): the call was not sent, so it is safe to
		// make again on a new one.
		if errors.Is(err, errNotSent) && attempt == 0 && ctx.Err() == nil {
			c.drop(conn)
			continue
		}
		if err != nil && errors.Is(err, mux.ErrClosed) {
			err = fmt.Errorf("%w: the connection to the agent broke: %v", ErrUnavailable, err)
		}
		return r, err
	}
}

// notConnectedError: a call found no agent to send it to (none answered,
// even after Recover). Asking again at once would only wait as long again.
type notConnectedError struct{ error }

func (e notConnectedError) Unwrap() error { return e.error }

// errNotSent: the call could not be sent at all.
var errNotSent = errors.New("the call was not sent")

// drop forgets a connection that is dead.
func (c *Client) drop(conn *mux.Conn) {
	c.mu.Lock()
	if c.conn == conn {
		c.conn = nil
	}
	c.mu.Unlock()
	conn.Close()
}

func (c *Client) roundTrip(ctx context.Context, conn *mux.Conn, method string, args, out any, limit int) error {
	_, err := c.open(ctx, conn, method, args, out, callOpts{headLimit: limit})
	return err
}

// open sends the call and reads the head; with o.keep the stream stays
// open for the body and the caller closes the reply.
func (c *Client) open(ctx context.Context, conn *mux.Conn, method string, args, out any, o callOpts) (*reply, error) {
	a, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	hdr, err := json.Marshal(wire.Call{Method: method, Args: a})
	if err != nil {
		return nil, err
	}
	st, err := conn.Open(ctx, hdr, o.body == nil && !o.duplex)
	if err != nil {
		if errors.Is(err, mux.ErrClosed) {
			return nil, fmt.Errorf("%w: %w", errNotSent, err)
		}
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { st.Reset("cancelled") })
	fail := func(err error) (*reply, error) {
		stop()
		st.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	if o.body != nil {
		// The agent may answer (an error, say) before it has read the whole
		// body, and stop it: its answer is then read all the same.
		_, err := io.Copy(st, o.body)
		if err == nil {
			err = st.CloseWrite()
		}
		var re *mux.ResetError
		if err != nil && !(errors.As(err, &re) && re.Remote) {
			return fail(err)
		}
	}
	limit := o.headLimit
	if limit <= 0 {
		limit = 1 << 20
	}
	var acked atomic.Bool
	if o.ack > 0 {
		t := time.AfterFunc(o.ack, func() {
			if !acked.Load() {
				st.Reset("no acknowledgement")
			}
		})
		defer t.Stop()
	}
	br := bufio.NewReaderSize(st, 4096)
	for {
		line, err := readLine(br, limit, o.bigLine)
		if err != nil {
			if o.ack > 0 && !acked.Load() && ctx.Err() == nil {
				err = fmt.Errorf("%w: the agent did not acknowledge %s within %s (%v)", ErrUnavailable, method, o.ack, err)
			}
			return fail(err)
		}
		acked.Store(true)
		var h wire.Head
		if err := json.Unmarshal(line, &h); err != nil {
			return fail(fmt.Errorf("%w: a malformed answer to %s: %v", ErrUnavailable, method, err))
		}
		switch {
		case h.E != nil:
			stop()
			st.Close()
			return nil, decodeError(h.E)
		case h.R != nil:
			if out != nil {
				if err := json.Unmarshal(h.R, out); err != nil {
					return fail(fmt.Errorf("%w: a malformed result of %s: %v", ErrUnavailable, method, err))
				}
				if v, ok := out.(validator); ok {
					if err := v.validate(c.cfg.OutputLimit); err != nil {
						return fail(fmt.Errorf("%w: an invalid result of %s: %v", ErrUnavailable, method, err))
					}
				}
			}
			if o.keep {
				return &reply{st: st, body: br, stop: stop}, nil
			}
			stop()
			st.Close()
			return nil, nil
		case h.ID != "":
			if !validCommandID(h.ID) {
				return fail(fmt.Errorf("%w: an invalid command id from the agent", ErrUnavailable))
			}
			if o.onID != nil {
				o.onID(h.ID)
			}
		default:
			return fail(fmt.Errorf("%w: an empty answer to %s", ErrUnavailable, method))
		}
	}
}

// decodeError is the error an agent answered (wire.DecodeError); the
// agent's refusal of the token (wire.ErrUnauthorized) is ErrUnavailable.
func decodeError(we *wire.Error) error {
	err := wire.DecodeError(we)
	if errors.Is(err, wire.ErrUnauthorized) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

// readLine reads one line of at most limit bytes. bigLine, if not nil, is
// called once the line passes smallLine bytes, before more is read (an
// error ends the read).
func readLine(br *bufio.Reader, limit int, bigLine func() error) ([]byte, error) {
	var buf bytes.Buffer
	for {
		frag, err := br.ReadSlice('\n')
		if buf.Len()+len(frag) > limit {
			return nil, fmt.Errorf("%w: an answer longer than %d bytes", ErrUnavailable, limit)
		}
		if bigLine != nil && buf.Len()+len(frag) > smallLine {
			if err := bigLine(); err != nil {
				return nil, err
			}
			bigLine = nil
		}
		buf.Write(frag)
		switch {
		case err == nil:
			return buf.Bytes(), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			return nil, fmt.Errorf("%w: the agent ended its answer early", ErrUnavailable)
		default:
			var re *mux.ResetError
			if errors.As(err, &re) && re.Remote {
				return nil, fmt.Errorf("%w: the agent aborted the call: %s", ErrUnavailable, wire.CleanText(re.Reason, 512))
			}
			return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
	}
}
