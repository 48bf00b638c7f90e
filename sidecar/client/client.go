// Package client is the Go client of patina's sidecar HTTP API (v1): its
// request and result types and a Client that calls it. It imports no Docker
// code; the CLI, the MCP server, the Dagger module and the end-to-end tests
// all use it.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Client calls a patina sidecar.
type Client struct {
	base  string
	token string
	hc    *http.Client
}

// idleConnTimeout is how long an idle connection to the sidecar is kept
// for the next call (net/http's DefaultTransport keeps one as long).
const idleConnTimeout = 90 * time.Second

// New returns a client for the sidecar at addr ("127.0.0.1:7070" or
// "http://host:port") authenticating with token. hc may be nil.
func New(addr, token string, hc *http.Client) *Client {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	if hc == nil {
		hc = &http.Client{Transport: &http.Transport{
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     idleConnTimeout,
		}}
	}
	return &Client{base: strings.TrimRight(addr, "/"), token: token, hc: hc}
}

// Addr returns the base URL.
func (c *Client) Addr() string { return c.base }

// APIError is an error answer from the sidecar.
type APIError struct {
	Status  int
	Code    string
	Message string
	// Field is the request's field at fault ("" when the answer names
	// none).
	Field string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s (%s)", e.Message, e.Code)
}

// Is matches the package's sentinel errors by code, so
// errors.Is(err, client.ErrBusy) works.
func (e *APIError) Is(target error) bool {
	var s codeError
	if errors.As(target, &s) {
		return string(s) == e.Code
	}
	return false
}

type codeError string

func (e codeError) Error() string { return string(e) }

// Sentinel errors matching APIError codes.
var (
	ErrInvalid      error = codeError(CodeInvalid)
	ErrUnauthorized error = codeError(CodeUnauthorized)
	ErrNotFound     error = codeError(CodeNotFound)
	ErrBusy         error = codeError(CodeBusy)
	ErrEnded        error = codeError(CodeEnded)
	ErrConflict     error = codeError(CodeConflict)
	ErrStopped      error = codeError(CodeStopped)
	ErrTooLarge     error = codeError(CodeTooLarge)
	ErrUnavailable  error = codeError(CodeUnavailable)
	ErrNotRunning   error = codeError(CodeNotRunning)
	ErrNoRepository error = codeError(CodeNoRepository)
	// ErrAgentUnavailable: the workspace's agent cannot be reached.
	ErrAgentUnavailable error = codeError(CodeAgentUnavailable)
	// ErrAdopting: the sidecar is still reconnecting to the workspace.
	ErrAdopting error = codeError(CodeAdopting)
)

func esc(s string) string { return url.PathEscape(s) }

// do sends a request with an optional JSON body and decodes a JSON answer
// into out (if not nil).
func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	resp, err := c.send(ctx, method, path, rd, "application/json", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// send sends a request and returns a 2xx response, or the error answer as
// an *APIError.
func (c *Client) send(ctx context.Context, method, path string, body io.Reader, ctype string, hdr http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	if body != nil && ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) && errors.Is(err, ErrNotSidecar) {
			return nil, ue.Err // its message names the server; not the call's URL again
		}
		return nil, err
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, apiErrorOf(resp)
}

// Health checks GET /healthz (no token needed).
func (c *Client) Health(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/healthz", nil, nil)
}

// CreateWorkspace creates a workspace.
func (c *Client) CreateWorkspace(ctx context.Context, req CreateWorkspaceRequest) (Workspace, error) {
	var w Workspace
	err := c.do(ctx, http.MethodPost, "/v1/workspaces", req, &w)
	return w, err
}

// ListWorkspaces lists workspaces.
func (c *Client) ListWorkspaces(ctx context.Context) ([]Workspace, error) {
	var ws []Workspace
	err := c.do(ctx, http.MethodGet, "/v1/workspaces", nil, &ws)
	return ws, err
}

// GetWorkspace returns a workspace by id or name.
func (c *Client) GetWorkspace(ctx context.Context, ws string) (Workspace, error) {
	var w Workspace
	err := c.do(ctx, http.MethodGet, "/v1/workspaces/"+esc(ws), nil, &w)
	return w, err
}

// SetNetwork changes a workspace's network policy, running or not:
// connections it no longer allows are cut. With narrow, the sidecar refuses
// (400) a policy that allows anything the current one does not.
func (c *Client) SetNetwork(ctx context.Context, ws string, p NetworkPolicy, narrow bool) (Workspace, error) {
	var w Workspace
	path := "/v1/workspaces/" + esc(ws) + "/network"
	if narrow {
		path += "?narrow=1"
	}
	err := c.do(ctx, http.MethodPut, path, p, &w)
	return w, err
}

// StopWorkspace stops a workspace's container (its files and notes stay).
func (c *Client) StopWorkspace(ctx context.Context, ws string) (Workspace, error) {
	var w Workspace
	err := c.do(ctx, http.MethodPost, "/v1/workspaces/"+esc(ws)+"/stop", nil, &w)
	return w, err
}

// ForkWorkspace makes a new workspace from ws: its container's filesystem,
// files, repository (a new branch at its current commit) and sessions'
// state; processes are not carried.
func (c *Client) ForkWorkspace(ctx context.Context, ws string, req ForkWorkspaceRequest) (Workspace, error) {
	var w Workspace
	err := c.do(ctx, http.MethodPost, "/v1/workspaces/"+esc(ws)+"/fork", req, &w)
	return w, err
}

// ForkWorkspaces makes req.Count forks of a workspace at once (all or
// none), named <name>-1 ... <name>-N when req.Name is set.
func (c *Client) ForkWorkspaces(ctx context.Context, ws string, req ForkWorkspaceRequest) ([]Workspace, error) {
	if req.Count <= 1 {
		w, err := c.ForkWorkspace(ctx, ws, req)
		if err != nil {
			return nil, err
		}
		return []Workspace{w}, nil
	}
	var out []Workspace
	err := c.do(ctx, http.MethodPost, "/v1/workspaces/"+esc(ws)+"/fork", req, &out)
	return out, err
}

// ForwardPort makes a port inside a workspace reachable on the sidecar's
// host loopback; asking again for a forwarded port returns it as it is.
func (c *Client) ForwardPort(ctx context.Context, ws string, req ForwardPortRequest) (PortForward, error) {
	var p PortForward
	err := c.do(ctx, http.MethodPost, "/v1/workspaces/"+esc(ws)+"/ports", req, &p)
	return p, err
}

// Ports lists a workspace's forwarded ports.
func (c *Client) Ports(ctx context.Context, ws string) ([]PortForward, error) {
	var l PortList
	err := c.do(ctx, http.MethodGet, "/v1/workspaces/"+esc(ws)+"/ports", nil, &l)
	return l.Ports, err
}

// ClosePort stops forwarding a workspace port (open connections through it
// are closed).
func (c *Client) ClosePort(ctx context.Context, ws string, port int) error {
	return c.do(ctx, http.MethodDelete, "/v1/workspaces/"+esc(ws)+"/ports/"+strconv.Itoa(port), nil, nil)
}

// StartWorkspace starts (or recreates) a workspace's container.
func (c *Client) StartWorkspace(ctx context.Context, ws string) (Workspace, error) {
	var w Workspace
	err := c.do(ctx, http.MethodPost, "/v1/workspaces/"+esc(ws)+"/start", nil, &w)
	return w, err
}

// DeleteOptions modify DeleteWorkspace.
type DeleteOptions struct {
	// KeepBranch keeps the git branch (and its notes).
	KeepBranch bool
}

// DeleteWorkspace removes a workspace: container, sessions, worktree and
// (unless kept) branch and notes.
func (c *Client) DeleteWorkspace(ctx context.Context, ws string, opts DeleteOptions) error {
	p := "/v1/workspaces/" + esc(ws)
	if opts.KeepBranch {
		p += "?keep_branch=1"
	}
	return c.do(ctx, http.MethodDelete, p, nil, nil)
}

func sessPath(ws, sid string) string {
	return "/v1/workspaces/" + esc(ws) + "/sessions/" + esc(sid)
}

// CreateSession creates a session in a workspace.
func (c *Client) CreateSession(ctx context.Context, ws string, req CreateSessionRequest) (Session, error) {
	var s Session
	err := c.do(ctx, http.MethodPost, "/v1/workspaces/"+esc(ws)+"/sessions", req, &s)
	return s, err
}

// ListSessions lists a workspace's sessions.
func (c *Client) ListSessions(ctx context.Context, ws string) ([]Session, error) {
	var ss []Session
	err := c.do(ctx, http.MethodGet, "/v1/workspaces/"+esc(ws)+"/sessions", nil, &ss)
	return ss, err
}

// GetSession describes a session.
func (c *Client) GetSession(ctx context.Context, ws, sid string) (Session, error) {
	var s Session
	err := c.do(ctx, http.MethodGet, sessPath(ws, sid), nil, &s)
	return s, err
}

// DeleteSession ends a session and removes it.
func (c *Client) DeleteSession(ctx context.Context, ws, sid string) error {
	return c.do(ctx, http.MethodDelete, sessPath(ws, sid), nil, nil)
}

// RestartSession gives a session whose shell has ended (exit, exec, a
// fatal signal) a new shell with the session's creation settings (cwd and
// environment); its history and command ids go on. A live session is
// left as it is.
func (c *Client) RestartSession(ctx context.Context, ws, sid string) (Session, error) {
	var s Session
	err := c.do(ctx, http.MethodPost, sessPath(ws, sid)+"/restart", nil, &s)
	return s, err
}

// SetEnv exports (and unsets) variables in a session's shell.
func (c *Client) SetEnv(ctx context.Context, ws, sid string, req SetEnvRequest) error {
	return c.do(ctx, http.MethodPost, sessPath(ws, sid)+"/env", req, nil)
}

// Exec runs a command in a session and waits for it. Session "default" is
// created on first use.
func (c *Client) Exec(ctx context.Context, ws, sid string, req ExecRequest) (ExecResult, error) {
	req.Async = false
	var r ExecResult
	err := c.do(ctx, http.MethodPost, sessPath(ws, sid)+"/exec", req, &r)
	return r, err
}

// Start starts a command and returns its id at once.
func (c *Client) Start(ctx context.Context, ws, sid string, req ExecRequest) (string, error) {
	req.Async = true
	var r AsyncResult
	err := c.do(ctx, http.MethodPost, sessPath(ws, sid)+"/exec", req, &r)
	return r.CommandID, err
}

// ExecStream runs a command and calls onOutput with each chunk of output as
// it is written (stream "stdout" or "stderr"), then returns the result
// (whose output fields are empty: the output came through onOutput).
func (c *Client) ExecStream(ctx context.Context, ws, sid string, req ExecRequest, onOutput func(stream string, data []byte)) (ExecResult, error) {
	req.Async = false
	b, err := json.Marshal(req)
	if err != nil {
		return ExecResult{}, err
	}
	resp, err := c.send(ctx, http.MethodPost, sessPath(ws, sid)+"/exec", bytes.NewReader(b), "application/json",
		http.Header{"Accept": {"text/event-stream"}})
	if err != nil {
		return ExecResult{}, err
	}
	defer resp.Body.Close()
	cid := resp.Header.Get("X-Patina-Command-Id")
	next := map[string]int64{}
	var result *ExecResult
	err = ReadEvents(resp.Body, func(ev StreamEvent) error {
		switch ev.Event {
		case "stdout", "stderr":
			b := ev.Bytes()
			if end := ev.Offset + int64(len(b)); end > next[ev.Event] {
				next[ev.Event] = end
			}
			if onOutput != nil {
				onOutput(ev.Event, b)
			}
		case "exit":
			result = ev.Result
		case "error":
			return &APIError{Status: 500, Code: CodeInternal, Message: ev.Data}
		}
		return nil
	})
	var apiErr *APIError
	switch {
	case err != nil && errors.As(err, &apiErr):
		return ExecResult{}, err
	case result == nil && cid != "" && ctx.Err() == nil:
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return ExecResult{}, &StreamLostError{CommandID: cid, Next: next, Err: err}
	case err != nil:
		return ExecResult{}, err
	case result == nil:
		return ExecResult{}, fmt.Errorf("exec stream ended without an exit event")
	}
	return *result, nil
}

// StreamLostError is ExecStream's error when the connection to the
// sidecar broke after the command started (the sidecar was restarted,
// say): the command runs on in its workspace. FollowCommand picks it up
// where the stream left it.
type StreamLostError struct {
	CommandID string
	// Next is, per stream ("stdout", "stderr"), the offset of the first
	// byte not yet passed on.
	Next map[string]int64
	Err  error
}

func (e *StreamLostError) Error() string {
	return fmt.Sprintf("lost the connection to the sidecar during command %s: %v", e.CommandID, e.Err)
}

func (e *StreamLostError) Unwrap() error { return e.Err }

// FollowCommand passes on a command's output from the offsets in next
// (per stream) until the command finishes, then returns its record: how
// a caller whose ExecStream was cut off (StreamLostError) gets the rest.
// onOutput is called from one goroutine at a time.
func (c *Client) FollowCommand(ctx context.Context, ws, sid, cid string, next map[string]int64, onOutput func(stream string, data []byte)) (Command, error) {
	var mu sync.Mutex
	errs := make(chan error, 2)
	for _, stream := range []string{"stdout", "stderr"} {
		go func() {
			rc, err := c.OpenOutput(ctx, ws, sid, cid, stream, next[stream], true)
			if err != nil {
				errs <- err
				return
			}
			defer rc.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := rc.Read(buf)
				if n > 0 && onOutput != nil {
					mu.Lock()
					onOutput(stream, buf[:n])
					mu.Unlock()
				}
				if err == io.EOF {
					errs <- nil
					return
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var first error
	for range 2 {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return Command{}, first
	}
	return c.Wait(ctx, ws, sid, cid)
}

// ReadEvents parses a text/event-stream of patina events, calling fn for
// each until EOF or an error.
func ReadEvents(r io.Reader, fn func(StreamEvent) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var event string
	var data strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if event != "" || data.Len() > 0 {
				var ev StreamEvent
				if d := data.String(); d != "" {
					if err := json.Unmarshal([]byte(d), &ev); err != nil {
						ev.Data = d
					}
				}
				ev.Event = event
				if err := fn(ev); err != nil {
					return err
				}
			}
			event = ""
			data.Reset()
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	return sc.Err()
}

// History lists a session's commands.
func (c *Client) History(ctx context.Context, ws, sid string) ([]Command, error) {
	var cs []Command
	err := c.do(ctx, http.MethodGet, sessPath(ws, sid)+"/commands", nil, &cs)
	return cs, err
}

// GetCommand returns a command's record.
func (c *Client) GetCommand(ctx context.Context, ws, sid, cid string) (Command, error) {
	var cmd Command
	err := c.do(ctx, http.MethodGet, sessPath(ws, sid)+"/commands/"+esc(cid), nil, &cmd)
	return cmd, err
}

// ReadOutput reads a command's stream ("stdout" or "stderr") from offset to
// its current end, byte-exact.
func (c *Client) ReadOutput(ctx context.Context, ws, sid, cid, stream string, offset int64) ([]byte, error) {
	rc, err := c.OpenOutput(ctx, ws, sid, cid, stream, offset, false)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// OpenOutput opens a command's stream from offset; with follow, the reader
// streams new output until the command finishes.
func (c *Client) OpenOutput(ctx context.Context, ws, sid, cid, stream string, offset int64, follow bool) (io.ReadCloser, error) {
	p := fmt.Sprintf("%s/commands/%s/%s?offset=%d", sessPath(ws, sid), esc(cid), esc(stream), offset)
	if follow {
		p += "&follow=1"
	}
	resp, err := c.send(ctx, http.MethodGet, p, nil, "", nil)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// Signal sends a signal (INT, TERM, KILL, ...) to a running command.
func (c *Client) Signal(ctx context.Context, ws, sid, cid, signal string) error {
	return c.do(ctx, http.MethodPost, sessPath(ws, sid)+"/commands/"+esc(cid)+"/signal", SignalRequest{Signal: signal}, nil)
}

// Wait polls a command until it finishes and returns its record. (Use
// OpenOutput with follow to stream its output meanwhile.)
func (c *Client) Wait(ctx context.Context, ws, sid, cid string) (Command, error) {
	for {
		cmd, err := c.GetCommand(ctx, ws, sid, cid)
		if err != nil || cmd.State != "running" {
			return cmd, err
		}
		// Following from far past the end returns when the command ends;
		// once it has ended, such an offset is refused (400): look again.
		rc, err := c.OpenOutput(ctx, ws, sid, cid, "stdout", 1<<62, true)
		if err != nil && !errors.Is(err, ErrInvalid) {
			return Command{}, err
		}
		if err == nil {
			_, _ = io.Copy(io.Discard, rc)
			rc.Close()
		}
		if err := ctx.Err(); err != nil {
			return cmd, err
		}
	}
}

func filePath(ws, path string) string {
	parts := strings.Split(strings.TrimLeft(path, "/"), "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return "/v1/workspaces/" + esc(ws) + "/files/" + strings.Join(parts, "/")
}

// ReadFile reads a file of the workspace (path relative to /workspace).
func (c *Client) ReadFile(ctx context.Context, ws, path string) ([]byte, error) {
	resp, err := c.send(ctx, http.MethodGet, filePath(ws, path), nil, "", nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.Header.Get("X-Patina-File-Type") == "dir" {
		return nil, &APIError{Status: 400, Code: CodeInvalid, Message: path + " is a directory"}
	}
	return io.ReadAll(resp.Body)
}

// WriteFile writes a file of the workspace, creating parent directories.
func (c *Client) WriteFile(ctx context.Context, ws, path string, data []byte) error {
	return c.WriteFileFrom(ctx, ws, path, bytes.NewReader(data))
}

// WriteFileFrom writes a file of the workspace from r, streaming,
// creating parent directories.
func (c *Client) WriteFileFrom(ctx context.Context, ws, path string, r io.Reader) error {
	resp, err := c.send(ctx, http.MethodPut, filePath(ws, path), r, "application/octet-stream", nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// OpenFile opens a file of the workspace for reading, streaming: its
// bytes and its size. The caller closes it.
func (c *Client) OpenFile(ctx context.Context, ws, path string) (io.ReadCloser, int64, error) {
	resp, err := c.send(ctx, http.MethodGet, filePath(ws, path), nil, "", nil)
	if err != nil {
		return nil, 0, err
	}
	if resp.Header.Get("X-Patina-File-Type") == "dir" {
		resp.Body.Close()
		return nil, 0, &APIError{Status: 400, Code: CodeInvalid, Message: path + " is a directory"}
	}
	return resp.Body, resp.ContentLength, nil
}

// DeleteFile removes a file or directory (recursively) of the workspace.
func (c *Client) DeleteFile(ctx context.Context, ws, path string) error {
	return c.do(ctx, http.MethodDelete, filePath(ws, path), nil, nil)
}

// ListDir lists a directory of the workspace.
func (c *Client) ListDir(ctx context.Context, ws, path string) ([]FileInfo, error) {
	resp, err := c.send(ctx, http.MethodGet, filePath(ws, path), nil, "", nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.Header.Get("X-Patina-File-Type") != "dir" {
		return nil, &APIError{Status: 400, Code: CodeInvalid, Message: path + " is not a directory"}
	}
	var fis []FileInfo
	if err := json.NewDecoder(resp.Body).Decode(&fis); err != nil {
		return nil, err
	}
	return fis, nil
}

// Diff returns the workspace's changes against its base.
func (c *Client) Diff(ctx context.Context, ws string) (Diff, error) {
	var d Diff
	err := c.do(ctx, http.MethodGet, "/v1/workspaces/"+esc(ws)+"/diff", nil, &d)
	return d, err
}

// Commit stages everything in the workspace and commits it.
func (c *Client) Commit(ctx context.Context, ws string, req CommitRequest) (CommitResult, error) {
	var r CommitResult
	err := c.do(ctx, http.MethodPost, "/v1/workspaces/"+esc(ws)+"/commit", req, &r)
	return r, err
}

// Merge merges the workspace branch into a branch of the user's repository.
func (c *Client) Merge(ctx context.Context, ws string, req MergeRequest) (MergeResult, error) {
	var r MergeResult
	err := c.do(ctx, http.MethodPost, "/v1/workspaces/"+esc(ws)+"/merge", req, &r)
	return r, err
}

// Apply stages the workspace's changes, squashed, in the user's working tree.
func (c *Client) Apply(ctx context.Context, ws string) (ApplyResult, error) {
	var r ApplyResult
	err := c.do(ctx, http.MethodPost, "/v1/workspaces/"+esc(ws)+"/apply", nil, &r)
	return r, err
}

// Log returns the workspace's log (its refs/notes/patina-log).
func (c *Client) Log(ctx context.Context, ws string) ([]LogEntry, error) {
	var l []LogEntry
	err := c.do(ctx, http.MethodGet, "/v1/workspaces/"+esc(ws)+"/log", nil, &l)
	return l, err
}
