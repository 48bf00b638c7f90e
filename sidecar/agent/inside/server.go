package inside

import (
	"bufio"
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/sidecar/agent/wire"
	"github.com/patina-dev/patina/sidecar/mux"
)

// Git is the workspace's own repository as the agent drives it (the
// worktree package's Inside); nil refuses git calls.
type Git interface {
	Init(ctx context.Context, req wire.GitInitRequest) error
	State(ctx context.Context) (wire.GitState, error)
	Commit(ctx context.Context, req wire.GitCommitRequest) (wire.GitCommitResult, error)
	Pack(ctx context.Context, want, have []string, w io.Writer) error
	// Has and Receive run the store of shipped objects: Receive indexes
	// a pack read from r that must bring commit.
	Has(ctx context.Context, commit string) (wire.GitStore, error)
	Receive(ctx context.Context, commit string, r io.Reader) (wire.GitStore, error)
}

// ServerConfig configures the agent. Zero values take the defaults noted.
type ServerConfig struct {
	// Setup, if set, is closed when the container-wide setup the agent
	// does as it starts (the git identity) is done: calls wait for it, up
	// to setupWait. A connection's hello does not.
	Setup <-chan struct{}
	// WorkspaceID is the workspace this agent serves; hello must name it.
	WorkspaceID string
	// Token must be presented in hello by every connection.
	Token string
	// StateDir holds the sessions (default /.patina/state).
	StateDir string
	// Workdir is the workspace's files (default /workspace).
	Workdir string
	// Version is reported by hello.
	Version string
	// Logger (default: discard).
	Logger *slog.Logger
	// Env is added to every session's environment.
	Env []string
	// OutputLimit is the head and tail of each stream in a result
	// (default 1 MiB).
	OutputLimit int
	// InterruptGrace is session.Config's (default 500 ms).
	InterruptGrace time.Duration
	// MaxFileBytes caps a file write (default 256 MiB); MaxStdin an exec's
	// stdin (default 16 MiB).
	MaxFileBytes int64
	MaxStdin     int64
	// Git runs the workspace's repository (nil: no git calls).
	Git Git
	// Launcher starts shells (default session.LocalLauncher).
	Launcher session.Launcher
	// TermLinger is how long a terminal nobody is attached to is kept for
	// a reconnect (default 60 s); TermKeep how much of its latest output
	// is kept for one (default 1 MiB).
	TermLinger time.Duration
	TermKeep   int
}

// Server is the agent: it owns the workspace's sessions and serves them.
type Server struct {
	cfg      ServerConfig
	log      *slog.Logger
	sessions *session.Manager
	hello    wire.Hello
	sessMu   sync.Mutex // serialises Ensure's create

	termMu sync.Mutex
	terms  map[string]*terminal // by session id

	calls atomic.Int64 // calls served, for releaseWhenQuiet

	connMu sync.Mutex
	conns  map[*mux.Conn]bool
	closed bool
	// done is NewServer's context's: the server's life.
	done <-chan struct{}
}

// NewServer opens the workspace's sessions (reattaching to those whose
// shells live) and returns a server ready to Serve.
func NewServer(ctx context.Context, cfg ServerConfig) (*Server, error) {
	if cfg.StateDir == "" {
		cfg.StateDir = "/.patina/state"
	}
	if cfg.Workdir == "" {
		cfg.Workdir = "/workspace"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.OutputLimit <= 0 {
		cfg.OutputLimit = 1 << 20
	}
	if cfg.MaxFileBytes <= 0 {
		cfg.MaxFileBytes = 256 << 20
	}
	if cfg.MaxStdin <= 0 {
		cfg.MaxStdin = 16 << 20
	}
	if cfg.Launcher == nil {
		cfg.Launcher = session.LocalLauncher{}
	}
	if cfg.TermLinger <= 0 {
		cfg.TermLinger = defaultTermLinger
	}
	if cfg.TermKeep <= 0 {
		cfg.TermKeep = defaultTermKeep
	}
	m, err := session.Open(ctx, session.Config{
		Dir:            filepath.Join(cfg.StateDir, "sessions"),
		Launcher:       cfg.Launcher,
		Logger:         cfg.Logger,
		Env:            cfg.Env,
		OutputLimit:    cfg.OutputLimit,
		InterruptGrace: cfg.InterruptGrace,
	})
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger.With("component", "agent"), sessions: m, conns: map[*mux.Conn]bool{}, terms: map[string]*terminal{}, done: ctx.Done()}
	s.hello = wire.Hello{WorkspaceID: cfg.WorkspaceID, Protocol: wire.ProtocolVersion, Version: cfg.Version, PID: os.Getpid(), StartedAt: time.Now().UTC()}
	for _, inf := range m.List() {
		s.hello.Sessions++
		if inf.State == session.StateIdle || inf.State == session.StateRunning {
			s.hello.Live++
		}
	}
	return s, nil
}

// Close closes every connection (callers see it drop, and reconnect to the
// next agent), then lets go of the sessions without ending them.
func (s *Server) Close() error {
	s.dropConns()
	return s.sessions.Close()
}

// dropConns closes every connection, and refuses new ones.
func (s *Server) dropConns() {
	s.connMu.Lock()
	s.closed = true
	conns := make([]*mux.Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.connMu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// stopping reports whether the server is shutting down.
func (s *Server) stopping() bool {
	select {
	case <-s.done:
		return true
	default:
	}
	s.connMu.Lock()
	defer s.connMu.Unlock()
	return s.closed
}

// Serve accepts connections until ctx ends or ln fails.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		go s.ServeConn(ctx, nc)
	}
}

// ServeConn serves one connection until it closes.
func (s *Server) ServeConn(ctx context.Context, nc net.Conn) {
	pc, err := wire.AcceptPipes(nc, handshakeTimeout)
	if err != nil {
		s.log.Debug("refused a connection", "err", err)
		nc.Close()
		return
	}
	nc = pc
	conn := mux.Server(nc, mux.Config{MaxStreams: 1024, Logger: s.log})
	defer conn.Close()
	s.connMu.Lock()
	if s.closed {
		s.connMu.Unlock()
		return
	}
	s.conns[conn] = true
	s.connMu.Unlock()
	defer func() {
		s.connMu.Lock()
		delete(s.conns, conn)
		s.connMu.Unlock()
	}()
	go func() {
		select {
		case <-ctx.Done():
			conn.Close()
		case <-conn.Done():
		}
	}()
	// The first stream must be hello with the token.
	hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	st, err := conn.Accept(hctx)
	cancel()
	if err != nil {
		return
	}
	if !s.handleHello(st) {
		return
	}
	for {
		st, err := conn.Accept(ctx)
		if err != nil {
			return
		}
		go s.serveStream(st)
	}
}

func (s *Server) handleHello(st *mux.Stream) bool {
	defer st.Close()
	var c wire.Call
	var req wire.HelloRequest
	if json.Unmarshal(st.Header(), &c) != nil || c.Method != wire.MethodHello || json.Unmarshal(c.Args, &req) != nil {
		writeErr(st, &wire.Error{Code: wire.CodeUnauthorized, Msg: "the first call must be hello"})
		return false
	}
	if subtle.ConstantTimeCompare([]byte(req.Token), []byte(s.cfg.Token)) != 1 || req.WorkspaceID != s.cfg.WorkspaceID {
		writeErr(st, &wire.Error{Code: wire.CodeUnauthorized, Msg: "wrong token or workspace"})
		return false
	}
	writeResult(st, s.hello)
	return true
}

// handler serves one call: args decoded by the handler, the answer written
// with writeResult/writeErr (or a head then a body).
type handler func(s *Server, st *mux.Stream, args json.RawMessage) error

var handlers = map[string]handler{
	wire.MethodSessionCreate: (*Server).sessionCreate,
	wire.MethodSessionList:   (*Server).sessionList,
	wire.MethodSessionGet:    (*Server).sessionGet,
	wire.MethodSessionRemove: (*Server).sessionRemove,
	wire.MethodSessionRevive: (*Server).sessionRevive,
	wire.MethodSessionEnv:    (*Server).sessionEnv,
	wire.MethodSessionFlush:  (*Server).sessionFlush,
	wire.MethodHistory:       (*Server).history,
	wire.MethodCommand:       (*Server).command,
	wire.MethodExec:          (*Server).exec,
	wire.MethodWait:          (*Server).wait,
	wire.MethodSignal:        (*Server).signal,
	wire.MethodOutput:        (*Server).output,
	wire.MethodFileRead:      (*Server).fileRead,
	wire.MethodFileList:      (*Server).fileList,
	wire.MethodFileWrite:     (*Server).fileWrite,
	wire.MethodFileDelete:    (*Server).fileDelete,
	wire.MethodGitInit:       (*Server).gitInit,
	wire.MethodGitState:      (*Server).gitState,
	wire.MethodGitCommit:     (*Server).gitCommit,
	wire.MethodGitPack:       (*Server).gitPack,
	wire.MethodGitHas:        (*Server).gitHas,
	wire.MethodGitReceive:    (*Server).gitReceive,
	wire.MethodPortDial:      (*Server).portDial,
	wire.MethodTermAttach:    (*Server).termAttach,
	wire.MethodSetup:         (*Server).setup,
}

// beforeSetup are the calls that need nothing of the agent's setup (they
// run no command and no git): a session's shell boots while the setup
// runs, and the session's first command waits for what is left of it.
var beforeSetup = map[string]bool{
	wire.MethodSetup:         true,
	wire.MethodSessionCreate: true,
	wire.MethodSessionList:   true,
	wire.MethodSessionGet:    true,
}

func (s *Server) serveStream(st *mux.Stream) {
	defer st.Close()
	s.calls.Add(1)
	var c wire.Call
	if err := json.Unmarshal(st.Header(), &c); err != nil {
		writeErr(st, &wire.Error{Code: wire.CodeInvalid, Msg: "bad call header: " + err.Error()})
		return
	}
	h, ok := handlers[c.Method]
	if !ok {
		writeErr(st, &wire.Error{Code: wire.CodeInvalid, Msg: fmt.Sprintf("unknown method %q", c.Method)})
		return
	}
	if !beforeSetup[c.Method] {
		s.waitSetup()
	}
	if err := h(s, st, c.Args); err != nil {
		if s.stopping() {
			// A failure caused by the shutdown (a session closed under a
			// waiting exec) would read as the call's answer. The
			// connection dropping instead tells the client that the agent
			// went away, and it asks the next agent.
			s.dropConns()
			return
		}
		writeErr(st, wire.EncodeError(err))
	}
}

// setupWait bounds how long a call waits for the agent's setup (which
// bounds its own steps to 10 s).
const setupWait = 15 * time.Second

// waitSetup waits for the agent's setup, if it is not done.
func (s *Server) waitSetup() {
	if s.cfg.Setup == nil {
		return
	}
	select {
	case <-s.cfg.Setup:
		return
	default:
	}
	t := time.NewTimer(setupWait)
	defer t.Stop()
	select {
	case <-s.cfg.Setup:
	case <-t.C:
	}
}

// decodeArgs decodes a call's arguments.
func decodeArgs(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: arguments: %v", session.ErrInvalid, err)
	}
	return nil
}

// writeResult answers with v and ends the stream.
func writeResult(st *mux.Stream, v any) {
	b, err := wire.ResultLine(v)
	if err != nil {
		writeErr(st, &wire.Error{Code: wire.CodeInternal, Msg: err.Error()})
		return
	}
	_, _ = st.WriteFinal(b)
}

func writeErr(st *mux.Stream, we *wire.Error) {
	b, _ := json.Marshal(wire.Head{E: we})
	_, _ = st.WriteFinal(append(b, '\n'))
}

// readBody reads a call's body, at most max bytes.
func readBody(st *mux.Stream, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(bufio.NewReader(st), max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%w: the body is over %d bytes", wire.ErrTooLarge, max)
	}
	return b, nil
}

// streamContext is cancelled when the stream is reset or its connection
// closes.
func streamContext(st *mux.Stream) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-st.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// CloseAll ends every session (their shells and processes): what stopping
// the container does.
func (s *Server) CloseAll(ctx context.Context) {
	s.hangupAll()
	s.sessions.CloseAll(ctx)
}
