package workspace

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/session/pty"
	"github.com/patina-dev/patina/sidecar/agent"
	"github.com/patina-dev/patina/sidecar/agent/wire"
)

// Validate is the one check of an exec request, whichever adapter made
// it: a command, with no NUL byte, a timeout not below zero, and a
// terminal of a size and type that can be.
func (req ExecRequest) Validate() error {
	if req.Command == "" {
		return fmt.Errorf("%w: command is required", ErrInvalid)
	}
	if strings.IndexByte(req.Command, 0) >= 0 {
		return fmt.Errorf("%w: command text contains a NUL byte", ErrInvalid)
	}
	if req.Timeout < 0 {
		return fmt.Errorf("%w: timeout must not be negative, got %s", ErrInvalid, req.Timeout)
	}
	if t := req.TTY; t != nil {
		if err := pty.ValidSize(t.Rows, t.Cols); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		if !validTerm(t.Term) {
			return fmt.Errorf("%w: term must be a terminal type such as xterm-256color (letters, digits and .+-_, at most 64), got %q", ErrInvalid, t.Term)
		}
	}
	return nil
}

// validTerm reports whether term can be a terminal type (a terminfo name).
func validTerm(term string) bool {
	if term == "" || len(term) > 64 {
		return false
	}
	for _, r := range term {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune(".+-_", r)) {
			return false
		}
	}
	return true
}

func (req ExecRequest) agent(sid string) (wire.ExecRequest, error) {
	if err := req.Validate(); err != nil {
		return wire.ExecRequest{}, err
	}
	return wire.ExecRequest{
		Session:   sid,
		Command:   req.Command,
		TimeoutMS: req.Timeout.Milliseconds(),
		Stdin:     req.Stdin != nil,
		TTY:       req.TTY.agent(),
		Ensure:    sid == DefaultSession, // in the agent's workdir, /workspace
	}, nil
}

// Exec runs a command in a session ("default" is created on first use)
// and waits for it. If ctx ends first, the command is stopped (SIGINT,
// grace, SIGKILL) and its result comes back with ctx's error.
func (m *Manager) Exec(ctx context.Context, idOrName, sid string, req ExecRequest) (ExecResult, error) {
	if err := session.ValidateID(sid); err != nil {
		return ExecResult{}, err
	}
	areq, err := req.agent(sid)
	if err != nil {
		return ExecResult{}, err
	}
	w, c, resumed, err := m.agentResuming(ctx, idOrName)
	if err != nil {
		return ExecResult{}, err
	}
	res, err := c.Exec(ctx, areq, req.Stdin)
	if res.CommandID != "" {
		w.logCommand(sid, req.Command, res.ExecResult)
	}
	out := execResult(res.ExecResult, resumed, res.Release)
	if err != nil && res.CommandID == "" {
		return out, w.explain(err)
	}
	return out, err
}

// StartCommand starts a command and returns its id, and whether the
// workspace was resumed after an idle stop to run it; the command's end is
// logged.
func (m *Manager) StartCommand(ctx context.Context, idOrName, sid string, req ExecRequest) (string, bool, error) {
	if err := session.ValidateID(sid); err != nil {
		return "", false, err
	}
	areq, err := req.agent(sid)
	if err != nil {
		return "", false, err
	}
	w, c, resumed, err := m.agentResuming(ctx, idOrName)
	if err != nil {
		return "", false, err
	}
	id, err := c.Start(ctx, areq, req.Stdin)
	if err != nil {
		return "", resumed, w.explain(err)
	}
	go w.logWhenDone(c, sid, id, req.Command)
	return id, resumed, nil
}

// logWaitLimit is how long logWhenDone waits for a command: the log is for
// people, the history has the truth.
const logWaitLimit = 24 * time.Hour

// logWhenDone logs a started command once it finishes (or gives up after
// logWaitLimit).
func (w *workspace) logWhenDone(c *agent.Client, sid, id, text string) {
	ctx, cancel := context.WithTimeout(w.m.bg, logWaitLimit)
	defer cancel()
	if res, err := c.Wait(ctx, sid, id); err == nil {
		res.Release()
		w.logCommand(sid, text, res.ExecResult)
	}
}

// Wait waits for a command's result. Its output was read within the
// sidecar's memory budget, and is given back to it at once: a caller that
// holds on to it should use Exec (or read the output by offset).
func (m *Manager) Wait(ctx context.Context, idOrName, sid, cid string) (ExecResult, error) {
	if err := session.ValidateID(sid); err != nil {
		return ExecResult{}, err
	}
	w, c, err := m.agentFor(ctx, idOrName)
	if err != nil {
		return ExecResult{}, err
	}
	res, err := c.Wait(ctx, sid, cid)
	res.Release()
	return execResult(res.ExecResult, false, nil), w.explain(err)
}

// Signal sends a signal to a running command: one of Signals.
func (m *Manager) Signal(ctx context.Context, idOrName, sid, cid, sig string) error {
	name, ok := SignalName(sig)
	if !ok {
		return fmt.Errorf("%w: signal must be one of %s; got %q", ErrInvalid, strings.Join(Signals, ", "), sig)
	}
	if err := session.ValidateID(sid); err != nil {
		return err
	}
	w, c, err := m.agentFor(ctx, idOrName)
	if err != nil {
		return err
	}
	return w.explain(c.Signal(context.WithoutCancel(ctx), sid, cid, name))
}

// Output opens a command's stdout or stderr from an offset: what is there
// now, or (Follow) everything until the command ends. The caller closes it.
// An offset past the end of a finished command's stream is invalid.
func (m *Manager) Output(ctx context.Context, idOrName string, req OutputRequest) (*OutputStream, error) {
	if err := session.ValidateID(req.Session); err != nil {
		return nil, err
	}
	if req.Stream != "stdout" && req.Stream != "stderr" {
		return nil, fmt.Errorf("%w: stream must be stdout or stderr", ErrInvalid)
	}
	if req.Offset < 0 {
		return nil, fmt.Errorf("%w: offset must be a byte offset ≥ 0", ErrInvalid)
	}
	w, c, err := m.agentFor(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	out, err := c.Output(ctx, wire.OutputRequest{Session: req.Session, Command: req.Command, Stream: req.Stream, Offset: req.Offset, Follow: req.Follow})
	return outputStream(out), w.explain(err)
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
