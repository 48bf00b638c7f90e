package workspace

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/sidecar/agent"
	"github.com/patina-dev/patina/sidecar/agent/wire"
)

func (req ExecRequest) agent(sid string) (wire.ExecRequest, error) {
	if req.Command == "" {
		return wire.ExecRequest{}, fmt.Errorf("%w: command is required", ErrInvalid)
	}
	if strings.IndexByte(req.Command, 0) >= 0 {
		return wire.ExecRequest{}, fmt.Errorf("%w: command text contains a NUL byte", session.ErrInvalid)
	}
	if req.Timeout < 0 {
		return wire.ExecRequest{}, fmt.Errorf("%w: timeout out of range", ErrInvalid)
	}
	return wire.ExecRequest{
		Session:   sid,
		Command:   req.Command,
		TimeoutMS: req.Timeout.Milliseconds(),
		Stdin:     req.Stdin != nil,
		TTY:       req.TTY,
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
	out := ExecResult{ExecResult: res.ExecResult, Resumed: resumed, release: res.Release}
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

// logWhenDone logs a started command once it finishes (or gives up after
// a day: the log is for people, the history has the truth).
func (w *workspace) logWhenDone(c *agent.Client, sid, id, text string) {
	ctx, cancel := context.WithTimeout(w.m.bg, 24*time.Hour)
	defer cancel()
	if res, err := c.Wait(ctx, sid, id); err == nil {
		res.Release()
		w.logCommand(sid, text, res.ExecResult)
	}
}

// Wait waits for a command's result. Its output was read within the
// sidecar's memory budget, and is given back to it at once: a caller that
// holds on to it should use Exec (or read the output by offset).
func (m *Manager) Wait(ctx context.Context, idOrName, sid, cid string) (session.ExecResult, error) {
	if err := session.ValidateID(sid); err != nil {
		return session.ExecResult{}, err
	}
	w, c, err := m.agentFor(ctx, idOrName)
	if err != nil {
		return session.ExecResult{}, err
	}
	res, err := c.Wait(ctx, sid, cid)
	res.Release()
	return res.ExecResult, w.explain(err)
}

// Signals a caller may send to a command.
var Signals = []string{"INT", "TERM", "KILL", "HUP", "QUIT", "USR1", "USR2"}

// Signal sends a signal to a running command.
func (m *Manager) Signal(ctx context.Context, idOrName, sid, cid, sig string) error {
	sig = strings.TrimPrefix(strings.ToUpper(sig), "SIG")
	ok := false
	for _, s := range Signals {
		ok = ok || s == sig
	}
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
	return w.explain(c.Signal(context.WithoutCancel(ctx), sid, cid, sig))
}

// Output opens a command's stdout or stderr from an offset: what is there
// now, or (Follow) everything until the command ends. The caller closes it.
// An offset past the end of a finished command's stream is invalid.
func (m *Manager) Output(ctx context.Context, idOrName string, req OutputRequest) (*agent.OutputStream, error) {
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
	return out, w.explain(err)
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
