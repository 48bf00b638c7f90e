package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/sidecar/agent/wire"
)

// resultLimit is the longest exec result line (its output follows it).
func (c *Client) resultLimit() int { return 256 << 10 }

// CreateSession creates a session.
func (c *Client) CreateSession(ctx context.Context, req wire.CreateSessionRequest) (session.Info, error) {
	var out sessionInfo
	_, err := c.call(ctx, wire.MethodSessionCreate, req, &out, callOpts{})
	return session.Info(out), err
}

// Sessions lists the sessions.
func (c *Client) Sessions(ctx context.Context) ([]session.Info, error) {
	var out sessionInfos
	_, err := c.call(ctx, wire.MethodSessionList, struct{}{}, &out, callOpts{headLimit: 4 << 20})
	return out, err
}

// Session describes one session.
func (c *Client) Session(ctx context.Context, sid string) (session.Info, error) {
	var out sessionInfo
	_, err := c.call(ctx, wire.MethodSessionGet, wire.SessionRef{Session: sid}, &out, callOpts{})
	return session.Info(out), err
}

// RemoveSession ends a session and deletes its history.
func (c *Client) RemoveSession(ctx context.Context, sid string) error {
	_, err := c.call(ctx, wire.MethodSessionRemove, wire.SessionRef{Session: sid}, nil, callOpts{})
	return err
}

// Setup tells the agent now what it is told on each connection (the
// environment of its new shells, the trust store): a workspace taken from
// the warm pool gets its user's this way. It answers the agent's warning,
// if any.
func (c *Client) Setup(ctx context.Context, req *wire.SetupRequest) (string, error) {
	var res setupResult
	_, err := c.call(ctx, wire.MethodSetup, req, &res, callOpts{})
	return res.Warning, err
}

// FlushSnapshots has every session whose state changed snapshot it now,
// before its workspace stops.
func (c *Client) FlushSnapshots(ctx context.Context) error {
	_, err := c.call(ctx, wire.MethodSessionFlush, struct{}{}, nil, callOpts{})
	return err
}

// Revive gives an ended session (or, with "", every ended one) a new shell
// with its last saved state.
func (c *Client) Revive(ctx context.Context, sid string) ([]session.Info, error) {
	var out sessionInfos
	_, err := c.call(ctx, wire.MethodSessionRevive, wire.ReviveRequest{Session: sid}, &out, callOpts{long: true, headLimit: 4 << 20})
	return out, err
}

// Restart gives session sid, whose own command ended its shell, a new
// shell with its creation settings; its history and command ids go on.
func (c *Client) Restart(ctx context.Context, sid string) (session.Info, error) {
	if c.speaksOld(ctx) {
		return session.Info{}, oldRefusal("restart a session with a new shell")
	}
	var out sessionInfos
	if _, err := c.call(ctx, wire.MethodSessionRevive, wire.ReviveRequest{Session: sid, Fresh: true}, &out, callOpts{long: true, headLimit: 1 << 20}); err != nil {
		return session.Info{}, err
	}
	if len(out) != 1 {
		return session.Info{}, fmt.Errorf("%w: the agent answered a restart with %d sessions", ErrUnavailable, len(out))
	}
	return out[0], nil
}

// SetEnv exports (and unsets) variables in a session.
func (c *Client) SetEnv(ctx context.Context, sid string, env map[string]string, unset []string) (session.Info, error) {
	var out sessionInfo
	_, err := c.call(ctx, wire.MethodSessionEnv, wire.SetEnvRequest{Session: sid, Env: env, Unset: unset}, &out, callOpts{})
	return session.Info(out), err
}

// History returns up to limit commands after command id after.
func (c *Client) History(ctx context.Context, sid string, after uint64, limit int) ([]session.CommandInfo, error) {
	var out commandInfos
	// A page is about 2 MiB (one command of up to 1 MiB, escaped, at worst).
	_, err := c.call(ctx, wire.MethodHistory, wire.HistoryRequest{Session: sid, After: after, Limit: limit}, &out, callOpts{headLimit: 12 << 20})
	return out, err
}

// Command returns one command's record.
func (c *Client) Command(ctx context.Context, sid, cid string) (session.CommandInfo, error) {
	var out commandInfo
	_, err := c.call(ctx, wire.MethodCommand, wire.CommandRef{Session: sid, Command: cid}, &out, callOpts{headLimit: 4 << 20})
	return session.CommandInfo(out), err
}

// Start starts a command and returns its id.
func (c *Client) Start(ctx context.Context, req wire.ExecRequest, stdin []byte) (string, error) {
	req.Async = true
	var out asyncResult
	_, err := c.call(ctx, wire.MethodExec, req, &out, c.execOpts(req, stdin))
	return out.CommandID, err
}

// ackTimeout bounds how long an agent may take to acknowledge a command
// (with its id, after quickWait, or its result): a live one takes
// milliseconds, or the start of a new session's shell (under 15 s, the
// session package's start timeout).
const ackTimeout = 20 * time.Second

func (c *Client) execOpts(req wire.ExecRequest, stdin []byte) callOpts {
	o := callOpts{headLimit: c.resultLimit(), ack: ackTimeout}
	if req.Stdin {
		o.body = bytes.NewReader(stdin)
	}
	return o
}

// Exec runs a command and waits for it. The command does not depend on
// the connection: if it breaks, Exec reconnects (the agent may have been
// restarted meanwhile) and waits for the same command. If ctx ends, the
// command is stopped with SIGINT and Exec returns its result (without its
// output) with ctx's error. A command with a timeout that the agent does
// not finish well after it is reported as ErrUnavailable. The caller
// releases the result (Result.Release).
func (c *Client) Exec(ctx context.Context, req wire.ExecRequest, stdin []byte) (Result, error) {
	req.Async = false
	var id string
	o := c.execOpts(req, stdin)
	o.long = true
	o.onID = func(s string) { id = s }
	callCtx, cancel := c.execDeadline(ctx, req.TimeoutMS)
	defer cancel()
	sent := time.Now()
	res, err := c.resultCall(callCtx, wire.MethodExec, req, o)
	if err == nil {
		return res, nil
	}
	switch {
	case ctx.Err() != nil:
		return c.stopAndWait(req.Session, id, ctx.Err())
	case callCtx.Err() != nil:
		return Result{}, fmt.Errorf("%w: the agent did not finish command %s within %d ms of its timeout", ErrUnavailable, id, req.TimeoutMS)
	case errors.Is(err, ErrUnavailable) && id != "":
		c.log.Info("connection lost during a command; waiting for it again", "session_id", req.Session, "command_id", id, "err", err)
		return c.waitAgain(callCtx, req.Session, id)
	case errors.Is(err, ErrUnavailable):
		// The connection broke before the agent said the command's id (a
		// command that kills the agent at once, or an agent that died as
		// the call went out): if the session started it, it is its newest
		// command; if it certainly did not, the call is made again.
		id, known := c.findStarted(callCtx, req, sent)
		switch {
		case id != "":
			c.log.Info("connection lost as a command started; waiting for it", "session_id", req.Session, "command_id", id, "err", err)
			return c.waitAgain(callCtx, req.Session, id)
		case known:
			c.log.Info("connection lost before a command started; sending it again", "session_id", req.Session, "err", err)
			res, err = c.resultCall(callCtx, wire.MethodExec, req, o)
			if err == nil {
				return res, nil
			}
		}
	}
	return Result{}, err
}

// Result is a command's result. Its output's bytes are held against the
// client's Budget until Release (which the holder calls once it has
// written them out; more calls do nothing).
type Result struct {
	session.ExecResult
	release func()
}

// Release gives the output's bytes back to the budget.
func (r Result) Release() {
	if r.release != nil {
		r.release()
	}
}

// resultCall makes an exec or wait call and reads its result: the line,
// then (once the client's share of the budget and the budget have the
// bytes) the output that follows it.
func (c *Client) resultCall(ctx context.Context, method string, args any, o callOpts) (Result, error) {
	if c.speaksOld(ctx) {
		return c.oldResultCall(ctx, method, args, o)
	}
	var checked execResult
	o.keep = true
	r, err := c.call(ctx, method, args, &checked, o)
	if err != nil {
		return Result{}, err
	}
	defer r.Close()
	out := wire.ExecResult(checked)
	if o.noOutput {
		return Result{ExecResult: out.Session([4][]byte{})}, nil
	}
	n := out.BodyLen()
	release, err := c.takeAnswer(ctx, n)
	if err != nil {
		return Result{}, err
	}
	// The agent has the output in hand: it sends it at once, or the bytes
	// taken are given back within CallTimeout.
	_ = r.st.SetReadDeadline(time.Now().Add(c.cfg.CallTimeout))
	var parts [4][]byte
	for i, l := range []int{out.Stdout.DataLen, out.Stdout.TailLen, out.Stderr.DataLen, out.Stderr.TailLen} {
		if l == 0 {
			continue
		}
		parts[i] = make([]byte, l)
		if _, err := io.ReadFull(r, parts[i]); err != nil {
			if release != nil {
				release()
			}
			if !errors.Is(err, ErrUnavailable) {
				err = fmt.Errorf("%w: the agent's answer to %s ended before its output", ErrUnavailable, method)
			}
			return Result{}, err
		}
	}
	return Result{ExecResult: out.Session(parts), release: release}, nil
}

// waitAgains bounds how often Exec waits again for a command whose
// connection broke: each is a new connection (the agent may restart more
// than once, or a connection be found dead only when used).
const waitAgains = 3

// waitAgain waits for a command whose connection broke, on a new
// connection each time one breaks, up to waitAgains times; not when no
// agent could be reached at all.
func (c *Client) waitAgain(ctx context.Context, sid, cid string) (Result, error) {
	for i := 1; ; i++ {
		res, err := c.Wait(ctx, sid, cid)
		var nc notConnectedError
		if err == nil || !errors.Is(err, ErrUnavailable) || errors.As(err, &nc) || i == waitAgains || ctx.Err() != nil {
			return res, err
		}
		c.log.Info("connection lost while waiting for a command; waiting again", "session_id", sid, "command_id", cid, "err", err)
	}
}

// findStarted looks for the command req started at or after sent: the
// session's newest command with its text. known says the session's
// history could be read (so "" means it did not start). It gives up
// quickly: an agent that does not answer this does not deserve long. An
// agent on its way out (a restart under way) is asked again, within that
// time.
func (c *Client) findStarted(ctx context.Context, req wire.ExecRequest, sent time.Time) (id string, known bool) {
	ctx, cancel := context.WithTimeout(ctx, findStartedTimeout)
	defer cancel()
	for {
		id, known = c.lookupStarted(ctx, req, sent)
		if known || ctx.Err() != nil {
			return id, known
		}
		select {
		case <-ctx.Done():
			return "", false
		case <-time.After(findStartedPoll):
		}
	}
}

// lookupStarted is one attempt of findStarted.
func (c *Client) lookupStarted(ctx context.Context, req wire.ExecRequest, sent time.Time) (id string, known bool) {
	inf, err := c.Session(ctx, req.Session)
	if errors.Is(err, session.ErrNotFound) {
		return "", true
	}
	if err != nil {
		return "", false
	}
	if inf.Commands == 0 {
		return "", true
	}
	hist, err := c.History(ctx, req.Session, uint64(max(inf.Commands-1, 0)), 1)
	if err != nil || len(hist) != 1 {
		return "", false
	}
	last := hist[0]
	if last.Command != req.Command || last.StartedAt.Before(sent.Add(-clockSkew)) {
		return "", true
	}
	return last.ID, true
}

// execDeadline bounds waiting for a command with a timeout: its timeout
// plus time for the stop to escalate.
func (c *Client) execDeadline(ctx context.Context, timeoutMS int64) (context.Context, context.CancelFunc) {
	if timeoutMS <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, time.Duration(timeoutMS)*time.Millisecond+stopEscalation)
}

// stopAndWait stops a command whose caller left and waits (bounded) for
// its result.
func (c *Client) stopAndWait(sid, id string, cause error) (Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), stopWaitTimeout)
	defer cancel()
	if id == "" {
		// It was cancelled before the agent said the command's id: the
		// command running now in the session is it.
		inf, err := c.Session(ctx, sid)
		if err != nil || inf.Running == "" {
			return Result{}, cause
		}
		id = inf.Running
	}
	if err := c.Signal(ctx, sid, id, "INT"); err != nil && !errors.Is(err, session.ErrNotRunning) {
		return Result{ExecResult: session.ExecResult{CommandID: id}}, cause
	}
	// The caller left: its result's output is not read (nor waited for
	// in the budget).
	res, err := c.resultCall(ctx, wire.MethodWait, wire.CommandRef{Session: sid, Command: id}, callOpts{long: true, headLimit: c.resultLimit(), noOutput: true})
	if err != nil {
		return Result{ExecResult: session.ExecResult{CommandID: id}}, cause
	}
	return res, cause
}

// Wait waits for a command's result (the caller releases it).
func (c *Client) Wait(ctx context.Context, sid, cid string) (Result, error) {
	return c.resultCall(ctx, wire.MethodWait, wire.CommandRef{Session: sid, Command: cid}, callOpts{long: true, headLimit: c.resultLimit()})
}

// Signal sends a signal (INT, TERM, KILL, HUP, QUIT, USR1, USR2) to a
// running command.
func (c *Client) Signal(ctx context.Context, sid, cid, sig string) error {
	_, err := c.call(ctx, wire.MethodSignal, wire.SignalRequest{Session: sid, Command: cid, Signal: sig}, nil, callOpts{})
	return err
}

// OutputStream is a command's output being read.
type OutputStream struct {
	io.ReadCloser
	// Size is the stream's size when the command had finished (else -1).
	Size int64
}

// Output reads a command's output from req.Offset: what is there (up to
// req.Limit), or everything until the command ends with req.Follow. The
// caller closes it.
func (c *Client) Output(ctx context.Context, req wire.OutputRequest) (*OutputStream, error) {
	var h outputHead
	r, err := c.call(ctx, wire.MethodOutput, req, &h, callOpts{keep: true, long: true, headLimit: 4096})
	if err != nil {
		return nil, err
	}
	var body io.ReadCloser = r
	if h.Size >= 0 {
		// A finished stream: never more than its size from the offset.
		body = limitedCloser{io.LimitReader(r, max(h.Size-req.Offset, 0)), r}
	}
	return &OutputStream{ReadCloser: body, Size: h.Size}, nil
}

type limitedCloser struct {
	io.Reader
	io.Closer
}

// File is a file being read from the workspace.
type File struct {
	io.ReadCloser
	Info wire.FileInfo
}

// ReadFile opens a file (relative to /workspace) for reading; a directory
// answers with its entries instead (File nil).
func (c *Client) ReadFile(ctx context.Context, path string) (*File, []wire.FileInfo, error) {
	var h fileHead
	r, err := c.call(ctx, wire.MethodFileRead, wire.FileRequest{Path: path}, &h, callOpts{keep: true, long: true, headLimit: 16 << 20})
	if err != nil {
		return nil, nil, err
	}
	if h.IsDir {
		r.Close()
		if h.Entries == nil {
			h.Entries = []wire.FileInfo{}
		}
		return nil, h.Entries, nil
	}
	if h.Type != "file" {
		r.Close()
		return nil, nil, fmt.Errorf("%w: the agent offered a %q as a file", ErrUnavailable, h.Type)
	}
	return &File{ReadCloser: limitedCloser{io.LimitReader(r, h.Size), r}, Info: h.FileInfo}, nil, nil
}

// ListDir lists a directory.
func (c *Client) ListDir(ctx context.Context, path string) ([]wire.FileInfo, error) {
	var out fileInfos
	_, err := c.call(ctx, wire.MethodFileList, wire.FileRequest{Path: path}, &out, callOpts{headLimit: 16 << 20})
	return out, err
}

// WriteFile writes body (at most max bytes) to a file, atomically.
func (c *Client) WriteFile(ctx context.Context, path string, body io.Reader, max int64) (wire.FileWriteResult, error) {
	var out fileWriteResult
	_, err := c.call(ctx, wire.MethodFileWrite, wire.FileWriteRequest{Path: path, Max: max}, &out, callOpts{body: body, long: true})
	return wire.FileWriteResult(out), err
}

// DeleteFile removes a file or a directory tree.
func (c *Client) DeleteFile(ctx context.Context, path string) error {
	_, err := c.call(ctx, wire.MethodFileDelete, wire.FileRequest{Path: path}, nil, callOpts{})
	return err
}

// GitInit makes /workspace the workspace's own repository.
func (c *Client) GitInit(ctx context.Context, req wire.GitInitRequest) error {
	if req.Reseed && c.speaksOld(ctx) {
		return oldRefusal("re-seed its repository from its base")
	}
	_, err := c.call(ctx, wire.MethodGitInit, req, nil, callOpts{long: true})
	return err
}

// GitState returns the workspace repository's head and a snapshot commit
// of its uncommitted work.
func (c *Client) GitState(ctx context.Context) (wire.GitState, error) {
	var out gitState
	_, err := c.call(ctx, wire.MethodGitState, struct{}{}, &out, callOpts{long: true})
	return wire.GitState(out), err
}

// GitCommit commits everything uncommitted in the workspace.
func (c *Client) GitCommit(ctx context.Context, req wire.GitCommitRequest) (wire.GitCommitResult, error) {
	var out gitCommitResult
	_, err := c.call(ctx, wire.MethodGitCommit, req, &out, callOpts{long: true})
	return wire.GitCommitResult(out), err
}

// GitHas says whether the workspace's store of shipped objects has commit.
func (c *Client) GitHas(ctx context.Context, commit string) (wire.GitStore, error) {
	var out wire.GitStore
	_, err := c.call(ctx, wire.MethodGitHas, wire.GitStoreRequest{Commit: commit}, &out, callOpts{})
	return out, err
}

// GitReceive sends the workspace a pack (from worktree.Repo.PackCommit)
// that brings commit, for its store of shipped objects.
func (c *Client) GitReceive(ctx context.Context, commit string, pack io.Reader) (wire.GitStore, error) {
	var out wire.GitStore
	_, err := c.call(ctx, wire.MethodGitReceive, wire.GitStoreRequest{Commit: commit}, &out, callOpts{body: pack, long: true})
	return out, err
}

// GitPack streams a pack of what want reaches and have does not. The
// caller bounds how much it reads.
func (c *Client) GitPack(ctx context.Context, want, have []string) (io.ReadCloser, error) {
	for _, id := range append(append([]string{}, want...), have...) {
		if !validObjectID(id) {
			return nil, fmt.Errorf("%w: %q is not an object id", session.ErrInvalid, id)
		}
	}
	r, err := c.call(ctx, wire.MethodGitPack, wire.GitPackRequest{Want: want, Have: have}, nil, callOpts{keep: true, long: true, headLimit: 4096})
	if err != nil {
		return nil, err
	}
	return r, nil
}
