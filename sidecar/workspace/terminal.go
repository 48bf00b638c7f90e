package workspace

import (
	"context"

	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/sidecar/agent"
	"github.com/patina-dev/patina/sidecar/agent/wire"
)

// TerminalRequest is an attach to a session's terminal.
type TerminalRequest struct {
	Rows, Cols int
	// Offset is where to resume the output of a terminal already running
	// (bytes since it started).
	Offset int64
	// Term is the terminal type for TERM (default xterm-256color).
	Term string
}

// Terminal is a session's terminal, attached: what an adapter bridges to
// its client. Next returns output (valid until the next call) or, last,
// how the terminal ended; Close detaches (the terminal stays), End ends
// it.
type Terminal interface {
	// Offset is where the output that Next returns starts; Started says
	// that this attach started the terminal.
	Offset() int64
	Started() bool
	Next() (TerminalEvent, error)
	Input(p []byte) error
	Resize(rows, cols int) error
	End() error
	Close() error
}

// TerminalEvent is output, or the terminal's end.
type TerminalEvent struct {
	Output []byte
	Exit   *TerminalExit
}

// TerminalExit is how a terminal ended: its shell's exit status (128+N
// for signal N; -1 unknown), and why when it was not the shell's choice.
type TerminalExit struct {
	ExitCode int
	Reason   string
}

// AttachTerminal attaches to a session's terminal, starting one if it has
// none ("default" is created on first use). A workspace stopped for being
// idle is started first (resumed: true). The terminal lives in the agent:
// closing the returned one detaches, End ends it.
func (m *Manager) AttachTerminal(ctx context.Context, idOrName, sid string, req TerminalRequest) (Terminal, bool, error) {
	if err := session.ValidateID(sid); err != nil {
		return nil, false, err
	}
	w, c, resumed, err := m.agentResuming(ctx, idOrName)
	if err != nil {
		return nil, false, err
	}
	t, err := c.AttachTerminal(ctx, wire.TermAttachRequest{Session: sid, Ensure: sid == DefaultSession,
		Rows: req.Rows, Cols: req.Cols, Offset: req.Offset, Term: req.Term})
	if err != nil {
		return nil, resumed, w.explain(err)
	}
	return agentTerminal{t}, resumed, nil
}

// agentTerminal is a Terminal in the agent.
type agentTerminal struct{ *agent.Terminal }

func (t agentTerminal) Offset() int64 { return t.Head.Offset }
func (t agentTerminal) Started() bool { return t.Head.Started }

func (t agentTerminal) Next() (TerminalEvent, error) {
	ev, err := t.Terminal.Next()
	out := TerminalEvent{Output: ev.Output}
	if ev.Exit != nil {
		out.Exit = &TerminalExit{ExitCode: ev.Exit.ExitCode, Reason: ev.Exit.Reason}
	}
	return out, err
}
