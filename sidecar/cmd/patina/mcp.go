package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/patina-dev/patina/sidecar/client"
	mcpserver "github.com/patina-dev/patina/sidecar/mcp"
)

// mcpOptions are mcp's flags.
type mcpOptions struct {
	noStart   bool
	logLevel  string
	maxOutput int
}

// mcpLockFile serialises, per state directory, patina mcp processes that
// find no sidecar, so that only one of them starts one.
const mcpLockFile = "mcp.lock"

// startRace is how long patina mcp looks for another sidecar when starting
// its own fails.
const startRace = 10 * time.Second

func newMCPCmd(a *app) *cobra.Command {
	var o mcpOptions
	cmd := &cobra.Command{
		Use:     "mcp",
		GroupID: "sidecar",
		Short:   "Serve patina's tools to coding agents over MCP (stdio)",
		Long: `Serve patina's tools to a coding agent (Claude Code, Cursor, Goose, ...) over the
Model Context Protocol, on stdin and stdout. The agent starts this command
itself: register it in the agent's MCP configuration, for example

  {"mcpServers": {"patina": {"command": "patina", "args": ["mcp"]}}}

The tools: workspace_create, workspace_list, workspace_delete, run,
command_output, command_signal, file_read, file_write, file_edit, file_list,
file_delete, diff, commit, merge and log.

patina mcp talks to the sidecar found like every other command (--addr, else
PATINA_ADDR, else <state-dir>/sidecar.json; the token from --token, else
PATINA_TOKEN, else <state-dir>/token). When none answers, it starts one in
its own process on the same state directory (listening on 127.0.0.1, port
chosen by the system, announced in <state-dir>/sidecar.json so that the other
commands find it), unless --no-start is given. That sidecar stops when the
agent closes the connection; the workspaces' containers and sessions keep
running, and the next sidecar adopts them.

Logs go to stderr: stdout carries the protocol.`,
		Example: `  patina mcp
  patina mcp --state-dir ~/.local/state/patina --log-level debug
  claude mcp add patina -- patina mcp`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.mcp(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.noStart, "no-start", false, "fail when no sidecar answers, instead of starting one in this process")
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error (logs go to stderr)")
	f.IntVar(&o.maxOutput, "max-output", 32<<10, "bytes of each output stream run shows, half from its start and half from its end; the rest is read with command_output")
	return cmd
}

// mcp serves the MCP tools on stdio until the client closes stdin or ctx
// ends, then stops the sidecar it started, if any (leaving containers and
// sessions running).
func (a *app) mcp(ctx context.Context, o mcpOptions) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return usagef("--log-level must be debug, info, warn or error, not %q", o.logLevel)
	}
	if o.maxOutput < 2 {
		return usagef("--max-output must be at least 2 bytes, got %d", o.maxOutput)
	}
	logger := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: level}))
	link := &sidecarLink{a: a, base: logger, log: logger.With("component", "mcp"), noStart: o.noStart}
	c, err := link.connect(ctx)
	if err != nil {
		return err
	}
	defer link.close()

	srv := mcpserver.New(c, mcpserver.Options{
		Version:    version,
		Logger:     logger,
		OutputHead: o.maxOutput / 2,
		OutputTail: o.maxOutput - o.maxOutput/2,
		Reconnect:  link.reconnect,
	})
	link.log.Info("serving MCP on stdio", "sidecar", c.Addr(), "in_process", link.inProcess())
	// Run returns when the client closes stdin. On SIGINT or SIGTERM, stop
	// without waiting for it: a read of stdin may not return until the
	// client writes or closes it.
	done := make(chan error, 1)
	go func() {
		done <- srv.Run(context.WithoutCancel(ctx), mcpserver.StdioTransport(a.stdin, a.stdout, link.log))
	}()
	select {
	case <-ctx.Done():
		link.log.Info("stopping on a signal")
		return nil
	case err = <-done:
	}
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, mcp.ErrConnectionClosed) {
		link.log.Info("the client closed the connection")
		return nil
	}
	return fmt.Errorf("mcp: %w", err)
}

// sidecarLink finds the sidecar, or starts one in this process, and finds
// it again when it goes away.
type sidecarLink struct {
	a         *app
	base, log *slog.Logger // base: for the sidecar, which tags its own logs
	noStart   bool

	mu  sync.Mutex
	svc localSidecar // the sidecar started in this process, if any
}

// connect returns a client for a sidecar that answers: the one the flags,
// the environment or the state directory name, else (unless noStart) one
// started in this process.
func (l *sidecarLink) connect(ctx context.Context) (*client.Client, error) {
	c, err := l.find(ctx)
	if err == nil || !client.NotSent(err) || l.noStart {
		return c, err
	}
	// Nothing answers. Start a sidecar, one process at a time: another
	// patina mcp on this state directory may be doing the same.
	dir := l.a.conn.StateDir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	unlock, err := lockFile(ctx, filepath.Join(dir, mcpLockFile))
	if err != nil {
		return nil, err
	}
	defer unlock()
	if c, err := l.find(ctx); err == nil || !client.NotSent(err) {
		return c, err // started meanwhile
	}
	return l.start(ctx)
}

// find resolves the connection and checks that a sidecar answers there and
// takes the token.
func (l *sidecarLink) find(ctx context.Context) (*client.Client, error) {
	c, err := l.a.client()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, findTimeout)
	defer cancel()
	if _, err := c.ListWorkspaces(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// start runs a sidecar in this process on the state directory: on the
// address given by --addr or PATINA_ADDR, else 127.0.0.1 on a free port,
// with the token given, else the state directory's (generated if need be).
func (l *sidecarLink) start(ctx context.Context) (*client.Client, error) {
	conn := l.a.conn
	req := localSidecarRequest{Addr: "127.0.0.1:0", StateDir: conn.StateDir, Logger: l.base}
	if conn.AddrFrom == "--addr" || conn.AddrFrom == envAddr {
		req.Addr = conn.Addr
	}
	if conn.TokenFrom == "--token" || conn.TokenFrom == envToken {
		req.Token = conn.Token
	}
	svc, err := startLocalSidecar(ctx, req)
	if err != nil {
		if errors.Is(err, errNoLocalSidecar) {
			return nil, fmt.Errorf("no sidecar answers at %s: %w", conn.Addr, err)
		}
		// A `patina serve` may be starting on this state directory (it
		// holds the directory's lock while it adopts): give it a moment.
		deadline := time.Now().Add(startRace)
		for time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(startRacePoll)
			if c, ferr := l.find(ctx); ferr == nil {
				return c, nil
			}
		}
		return nil, fmt.Errorf("no sidecar answers at %s, and starting one failed: %w", conn.Addr, err)
	}
	l.svc = svc
	l.a.conn = &connection{StateDir: conn.StateDir, Addr: svc.Addr(), AddrFrom: "in-process sidecar", Token: svc.Token(), TokenFrom: "in-process sidecar"}
	l.log.Info("no sidecar answered: started one in this process", "addr", svc.Addr(), "state_dir", conn.StateDir)
	return client.New(svc.Addr(), svc.Token(), localHTTPClient()), nil
}

// reconnect is called when the sidecar no longer accepts connections (the
// process that ran it has stopped): it finds or starts another.
func (l *sidecarLink) reconnect(ctx context.Context) (*client.Client, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.svc != nil {
		select {
		case <-l.svc.Done():
			l.svc = nil // it stopped; find or start another
		default:
			return nil, errors.New("the sidecar in this process does not accept connections")
		}
	}
	l.log.Warn("the sidecar went away: looking for another")
	return l.connect(ctx)
}

func (l *sidecarLink) inProcess() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.svc != nil
}

// close stops the sidecar started in this process, if any; its workspaces'
// containers and sessions keep running.
func (l *sidecarLink) close() {
	l.mu.Lock()
	svc := l.svc
	l.svc = nil
	l.mu.Unlock()
	if svc == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), embeddedShutdown)
	defer cancel()
	if err := svc.Shutdown(ctx); err != nil {
		l.log.Warn("shut down the sidecar", "err", err)
		return
	}
	l.log.Info("stopped the sidecar; workspaces and sessions keep running")
}

// localHTTPClient is an HTTP client for a sidecar on this machine: no
// proxy, a short dial timeout.
func localHTTPClient() *http.Client {
	d := &net.Dialer{Timeout: dialTimeout, KeepAlive: localKeepAlive}
	return &http.Client{Transport: &http.Transport{
		Proxy:               nil,
		DialContext:         d.DialContext,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     localIdleConn,
	}}
}
