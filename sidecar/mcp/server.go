// Package mcpserver is patina's Model Context Protocol server: the tools a
// coding agent (Claude Code, Cursor, Goose, ...) calls to create
// workspaces, run commands in their persistent shells, read and edit files
// and diff, commit and merge their branches. Each tool is a thin handler
// over the sidecar's Go client (package sidecar/client); what the model
// reads is shaped here: long output cut to head and tail, numbered file
// lines, exact-match edits, errors as tool errors carrying the sidecar's
// message. `patina mcp` serves it over stdio. See DESIGN.md.
package mcpserver

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/patina-dev/patina/sidecar/client"
)

// Options configure the server. Zero values take the defaults noted.
type Options struct {
	// Version is reported to clients when they connect.
	Version string
	// Logger receives the server's logs (default: discard). Never stdout:
	// over stdio, stdout is the protocol.
	Logger *slog.Logger
	// OutputHead and OutputTail are how many bytes of each output stream
	// run shows: its first and its last (default 16 KiB each); the rest is
	// read with command_output.
	OutputHead, OutputTail int
	// ReadChunk is how many bytes command_output returns unless asked
	// (default 32 KiB); MaxReadChunk caps what it may be asked (1 MiB).
	ReadChunk, MaxReadChunk int
	// RunTimeout stops a foreground run that was given no timeout_ms
	// (default 10 minutes).
	RunTimeout time.Duration
	// CallTimeout bounds every sidecar call but exec and waits (default 5
	// minutes).
	CallTimeout time.Duration
	// SignalWait is how long command_signal waits to report that the
	// command ended (default 2 s).
	SignalWait time.Duration
	// MaxReadLines and MaxReadBytes cap what file_read returns at once
	// (default 2000 lines, 128 KiB).
	MaxReadLines, MaxReadBytes int
	// MaxDiffBytes caps the diff text (default 64 KiB); the list of changed
	// files is always complete.
	MaxDiffBytes int
	// MaxListEntries caps file_list (default 1000); MaxLogEntries caps log,
	// which shows the latest (default 200).
	MaxListEntries, MaxLogEntries int
	// WorkDir resolves a relative repo of workspace_create (default: the
	// process's working directory, where MCP clients start the server:
	// the user's project).
	WorkDir string
	// Reconnect, when set, is called when the sidecar cannot be reached
	// (nothing accepts a connection at its address): it returns a client
	// for a sidecar that answers, found or started, and the call is tried
	// again on it. Only calls that never reached a sidecar are retried.
	Reconnect func(ctx context.Context) (*client.Client, error)
}

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.OutputHead, 16<<10)
	def(&o.OutputTail, 16<<10)
	def(&o.ReadChunk, 32<<10)
	def(&o.MaxReadChunk, 1<<20)
	def(&o.MaxReadLines, 2000)
	def(&o.MaxReadBytes, 128<<10)
	def(&o.MaxDiffBytes, 64<<10)
	def(&o.MaxListEntries, 1000)
	def(&o.MaxLogEntries, 200)
	if o.RunTimeout <= 0 {
		o.RunTimeout = 10 * time.Minute
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 5 * time.Minute
	}
	if o.SignalWait <= 0 {
		o.SignalWait = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.WorkDir == "" {
		o.WorkDir, _ = os.Getwd()
	}
	return o
}

// instructions tell the model what patina is and how its tools fit.
const instructions = `patina gives you isolated Linux workspaces. Each workspace is a Docker container (Debian, bash) with its files at /workspace.
A workspace created with repo is a new git branch patina/<name> of that repository, checked out at /workspace: your changes stay off the user's checkout until you commit and merge.
Typical flow: workspace_create -> run and file_* tools -> diff -> commit -> merge. merge takes exactly what the last diff showed: after any change, diff again.
run keeps shell state between calls in the same session: cd, exported variables, functions and aliases persist. Long output is cut to its head and tail; the marker says how to read the rest with command_output.
File tools take paths relative to /workspace (not to the shell's cwd); absolute paths under /workspace work too.`

// server holds the client and the options the tools share.
type server struct {
	opts Options
	log  *slog.Logger

	mu sync.Mutex
	c  *client.Client
}

// New returns an MCP server whose tools call the sidecar through c. Run it
// with (*mcp.Server).Run on a transport (mcp.StdioTransport for `patina
// mcp`).
func New(c *client.Client, opts Options) *mcp.Server {
	opts = opts.withDefaults()
	s := &server{opts: opts, log: opts.Logger.With("component", "mcp"), c: c}
	ms := mcp.NewServer(&mcp.Implementation{
		Name:    "patina",
		Title:   "patina workspaces",
		Version: opts.Version,
	}, &mcp.ServerOptions{
		Instructions: instructions,
		Logger:       slog.New(quietHandler{opts.Logger.Handler()}).With("component", "mcp-sdk"),
		Capabilities: &mcp.ServerCapabilities{}, // no logging capability: tools only
	})
	s.addWorkspaceTools(ms)
	s.addRunTools(ms)
	s.addFileTools(ms)
	s.addGitTools(ms)
	s.addPortTools(ms)
	s.addForkTool(ms)
	s.addNetworkTool(ms)
	return ms
}

// ToolNames are the names of the tools New registers, in order.
var ToolNames = []string{
	"workspace_create", "workspace_list", "workspace_delete", "workspace_stop", "workspace_start", "session_list",
	"run", "command_output", "command_signal",
	"file_read", "file_write", "file_edit", "file_list", "file_delete",
	"diff", "commit", "merge", "log", "apply",
	"port_forward", "workspace_fork", "network_restrict",
}

// handler is a tool's logic: the text the model reads and the structured
// result, or an error that becomes a tool error.
type handler[In, Out any] func(ctx context.Context, in In) (text string, out Out, err error)

// addTool registers a tool whose handler cannot take the server down: an
// error or a panic becomes a tool error (IsError), not a protocol error.
func addTool[In, Out any](s *server, ms *mcp.Server, t *mcp.Tool, h handler[In, Out]) {
	if t.InputSchema == nil {
		t.InputSchema = inputSchema[In]()
	}
	mcp.AddTool(ms, t, func(ctx context.Context, _ *mcp.CallToolRequest, in In) (res *mcp.CallToolResult, out Out, err error) {
		start := time.Now()
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("tool panicked", "tool", t.Name, "panic", p, "stack", string(debug.Stack()))
				var zero Out
				res, out, err = nil, zero, fmt.Errorf("internal error in patina's %s tool: %v", t.Name, p)
			}
		}()
		text, out, err := h(ctx, in)
		if err != nil {
			s.log.Debug("tool failed", "tool", t.Name, "err", err, "duration_ms", time.Since(start).Milliseconds())
			return nil, out, s.explain(err)
		}
		s.log.Debug("tool done", "tool", t.Name, "duration_ms", time.Since(start).Milliseconds())
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
	})
}

// client returns the current client.
func (s *server) client() *client.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c
}

// call runs fn with the client. When the sidecar cannot be reached and
// Options.Reconnect is set, it reconnects and runs fn once more: only
// when the failure was a refused or failed dial, so the sidecar never saw
// the request and running it again repeats nothing.
func (s *server) call(ctx context.Context, fn func(*client.Client) error) error {
	c := s.client()
	err := fn(c)
	if err == nil || s.opts.Reconnect == nil || !client.NotSent(err) || ctx.Err() != nil {
		return err
	}
	nc, rerr := s.reconnect(ctx, c)
	if rerr != nil {
		s.log.Warn("reconnect to the sidecar", "err", rerr)
		return &unreachableError{addr: c.Addr(), err: err, reconnect: rerr}
	}
	return fn(nc)
}

// reconnect replaces the client failed, unless another call did already.
func (s *server) reconnect(ctx context.Context, failed *client.Client) (*client.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c != failed {
		return s.c, nil
	}
	nc, err := s.opts.Reconnect(ctx)
	if err != nil {
		return nil, err
	}
	s.log.Info("reconnected to the sidecar", "addr", nc.Addr(), "was", failed.Addr())
	s.c = nc
	return nc, nil
}

// callCtx bounds a sidecar call that is not a wait.
func (s *server) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.opts.CallTimeout)
}

// argError is a tool argument that is missing or wrong.
type argError struct{ msg string }

func (e *argError) Error() string { return "invalid arguments: " + e.msg }

func argErrorf(format string, args ...any) error {
	return &argError{msg: fmt.Sprintf(format, args...)}
}

// required checks that a string argument is not empty.
func required(name, value, what string) error {
	if value == "" {
		return argErrorf("%s is required: %s", name, what)
	}
	return nil
}

// unreachableError says the sidecar could not be reached.
type unreachableError struct {
	addr      string
	err       error
	reconnect error
}

func (e *unreachableError) Error() string {
	msg := fmt.Sprintf("cannot reach the patina sidecar at %s: %v", e.addr, client.RootCause(e.err))
	if e.reconnect != nil {
		msg += fmt.Sprintf("; starting or finding another failed: %v", e.reconnect)
	}
	return msg + ". Ask the user to check that `patina serve` runs (or restart the patina MCP server)."
}

func (e *unreachableError) Unwrap() error { return e.err }

// quietHandler passes the SDK's own logs on from warnings up, or all of
// them when debug logs are on: its info logs (session connected,
// initialized, ...) are noise otherwise.
type quietHandler struct{ slog.Handler }

func (h quietHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.Handler.Enabled(ctx, l) && (l >= slog.LevelWarn || h.Handler.Enabled(ctx, slog.LevelDebug))
}

func (h quietHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return quietHandler{h.Handler.WithAttrs(as)}
}

func (h quietHandler) WithGroup(name string) slog.Handler {
	return quietHandler{h.Handler.WithGroup(name)}
}

// inputSchema is the JSON schema inferred from In's fields and tags, with
// what tags cannot say: the closed sets of values (stream, signal,
// encoding) as enums and the ports' bounds.
func inputSchema[In any]() *jsonschema.Schema {
	sc, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("the schema of %T: %v", *new(In), err))
	}
	enum := func(vs ...string) []any {
		out := make([]any, len(vs))
		for i, v := range vs {
			out[i] = v
		}
		return out
	}
	for name, p := range sc.Properties {
		switch name {
		case "stream":
			p.Enum = enum("stdout", "stderr")
		case "encoding":
			p.Enum = enum("text", "base64")
		case "signal":
			p.Enum = enum(client.Signals...)
		case "port":
			p.Minimum, p.Maximum = ptr(1.0), ptr(65535.0)
		}
	}
	return sc
}
