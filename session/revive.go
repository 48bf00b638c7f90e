package session

import (
	"context"
	"fmt"
	"os"
)

// Revive starts a new shell for an ended session (its container restarted,
// say), in the same directory: history and command numbering continue, and
// the shell's state (cwd, environment, functions, aliases, options) is
// restored from the session's last snapshot, else from its creation
// settings. Processes the old shell ran are not revived. A closed session
// cannot be revived.
func (m *Manager) Revive(ctx context.Context, id string) (*Session, error) {
	return m.revive(ctx, id, false)
}

// revive starts a new shell for ended session id: restored from its last
// snapshot, or, when fresh, with its creation settings only.
func (m *Manager) revive(ctx context.Context, id string, fresh bool) (*Session, error) {
	old, err := m.Get(id)
	if err != nil {
		return nil, err
	}
	old.mu.Lock()
	state, meta := old.state, old.meta
	old.mu.Unlock()
	switch state {
	case StateClosed:
		return nil, fmt.Errorf("revive session %s: %w", id, ErrClosed)
	case StateIdle, StateRunning:
		return old, nil // alive
	}
	if !old.isTornDown() {
		old.teardown()
	}
	extra := createScript(meta)
	if sn := meta.Snapshot; sn != nil && !fresh {
		if _, err := os.Stat(sn.File); err == nil {
			extra = fmt.Sprintf(`\builtin source %s 2>/dev/null; `, shellQuote(sn.File))
		}
	}
	s, err := boot(ctx, m, old.dir, meta, extra)
	if err != nil {
		return nil, fmt.Errorf("revive session %s: %w", id, err)
	}
	m.mu.Lock()
	m.sessions[id] = s
	m.mu.Unlock()
	s.log.Info("session revived", "from_snapshot", meta.Snapshot != nil && !fresh)
	return s, nil
}

// isTornDown reports whether the session's descriptors are released.
func (s *Session) isTornDown() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.detached
}
