package workspace

import (
	"context"

	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/sidecar/agent"
	"github.com/patina-dev/patina/sidecar/agent/wire"
)

// AttachTerminal attaches to a session's terminal, starting one if it has
// none ("default" is created on first use). A workspace stopped for being
// idle is started first (resumed: true). The terminal lives in the agent:
// closing the returned one detaches, End ends it.
func (m *Manager) AttachTerminal(ctx context.Context, idOrName, sid string, req wire.TermAttachRequest) (t *agent.Terminal, resumed bool, err error) {
	if err := session.ValidateID(sid); err != nil {
		return nil, false, err
	}
	w, c, resumed, err := m.agentResuming(ctx, idOrName)
	if err != nil {
		return nil, false, err
	}
	req.Session, req.Ensure = sid, sid == DefaultSession
	t, err = c.AttachTerminal(ctx, req)
	if err != nil {
		return nil, resumed, w.explain(err)
	}
	return t, resumed, nil
}
