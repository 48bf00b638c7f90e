package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/sidecar/agent"
	"github.com/patina-dev/patina/sidecar/agent/wire"
	"github.com/patina-dev/patina/worktree"
)

// DefaultSession is created on first use by an exec.
const DefaultSession = "default"

// CreateSession starts a session (cwd default /workspace).
func (m *Manager) CreateSession(ctx context.Context, idOrName string, req CreateSessionRequest) (SessionInfo, error) {
	if req.ID != "" {
		if err := session.ValidateID(req.ID); err != nil {
			return SessionInfo{}, err
		}
	}
	w, c, err := m.agentFor(ctx, idOrName) // an empty cwd is the agent's workdir, /workspace
	if err != nil {
		return SessionInfo{}, err
	}
	inf, err := c.CreateSession(ctx, req.agent())
	return sessionInfo(inf), w.explain(err)
}

// Sessions lists a workspace's sessions; while it is stopped, as they were
// when it stopped.
func (m *Manager) Sessions(ctx context.Context, idOrName string) ([]SessionInfo, error) {
	w, err := m.ready(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	return w.sessions(ctx)
}

// PeekSessions lists a workspace's sessions as Sessions does, but does not
// count as activity (see idle.go): a console that watches them does not
// keep the workspace from being stopped when idle.
func (m *Manager) PeekSessions(ctx context.Context, idOrName string) ([]SessionInfo, error) {
	w, err := m.lookup(idOrName)
	if err != nil {
		return nil, err
	}
	if err := w.waitAdopted(ctx, m.cfg.AdoptWait); err != nil {
		return nil, err
	}
	return w.sessions(ctx)
}

func (w *workspace) sessions(ctx context.Context) ([]SessionInfo, error) {
	c, err := w.client()
	if err != nil {
		if cache, cerr := w.readCache(); cerr == nil {
			return sessionInfos(cache.Sessions), nil
		}
		return nil, err
	}
	out, err := c.Sessions(ctx)
	return sessionInfos(out), w.explain(err)
}

// Session describes one session.
func (m *Manager) Session(ctx context.Context, idOrName, sid string) (SessionInfo, error) {
	if err := session.ValidateID(sid); err != nil {
		return SessionInfo{}, err
	}
	w, err := m.ready(ctx, idOrName)
	if err != nil {
		return SessionInfo{}, err
	}
	c, err := w.client()
	if err != nil {
		if cache, cerr := w.readCache(); cerr == nil {
			for _, inf := range cache.Sessions {
				if inf.ID == sid {
					return sessionInfo(inf), nil
				}
			}
			return SessionInfo{}, fmt.Errorf("%w: session %s", session.ErrNotFound, sid)
		}
		return SessionInfo{}, err
	}
	inf, err := c.Session(ctx, sid)
	if errors.Is(err, session.ErrNotFound) && sid == DefaultSession {
		err = fmt.Errorf("%w: session %q (it is created on first use)", session.ErrNotFound, sid)
	}
	return sessionInfo(inf), w.explain(err)
}

// RemoveSession ends a session and deletes its history.
func (m *Manager) RemoveSession(ctx context.Context, idOrName, sid string) error {
	if err := session.ValidateID(sid); err != nil {
		return err
	}
	w, c, err := m.agentFor(ctx, idOrName)
	if err != nil {
		return err
	}
	return w.explain(c.RemoveSession(ctx, sid))
}

// RestartSession gives a session whose shell has ended a new shell with
// its creation settings; its history and command ids go on.
func (m *Manager) RestartSession(ctx context.Context, idOrName, sid string) (SessionInfo, error) {
	if err := session.ValidateID(sid); err != nil {
		return SessionInfo{}, err
	}
	w, c, err := m.agentFor(ctx, idOrName)
	if err != nil {
		return SessionInfo{}, err
	}
	inf, err := c.Restart(ctx, sid)
	return sessionInfo(inf), w.explain(err)
}

// SetEnv exports (and unsets) variables in a session.
func (m *Manager) SetEnv(ctx context.Context, idOrName, sid string, env map[string]string, unset []string) (SessionInfo, error) {
	if len(env) == 0 && len(unset) == 0 {
		return SessionInfo{}, fmt.Errorf("%w: env (or unset) is required", ErrInvalid)
	}
	if err := session.ValidateID(sid); err != nil {
		return SessionInfo{}, err
	}
	w, c, err := m.sessionClient(ctx, idOrName, sid)
	if err != nil {
		return SessionInfo{}, err
	}
	inf, err := c.SetEnv(ctx, sid, env, unset)
	return sessionInfo(inf), w.explain(err)
}

// sessionClient resolves a running workspace's agent for a session,
// creating "default" on first use.
func (m *Manager) sessionClient(ctx context.Context, idOrName, sid string) (*workspace, *agent.Client, error) {
	w, c, err := m.agentFor(ctx, idOrName)
	if err != nil {
		return nil, nil, err
	}
	if sid == DefaultSession {
		if _, err := c.CreateSession(ctx, wire.CreateSessionRequest{ID: sid}); err != nil && !errors.Is(err, session.ErrExists) {
			return nil, nil, w.explain(err)
		}
	}
	return w, c, nil
}

// History calls fn with the session's commands, oldest first, a page at a
// time (memory stays bounded however long the history); while the
// workspace is stopped, as it was when it stopped.
func (m *Manager) History(ctx context.Context, idOrName, sid string, fn func([]CommandInfo) error) error {
	if err := session.ValidateID(sid); err != nil {
		return err
	}
	w, err := m.ready(ctx, idOrName)
	if err != nil {
		return err
	}
	c, err := w.client()
	if err != nil {
		cache, cerr := w.readCache()
		if cerr != nil {
			return err
		}
		hist, ok := cache.History[sid]
		if !ok {
			return fmt.Errorf("%w: session %s", session.ErrNotFound, sid)
		}
		return fn(commandInfos(hist))
	}
	var after uint64
	for {
		page, err := c.History(ctx, sid, after, wire.MaxHistoryPage)
		if err != nil {
			if after == 0 && errors.Is(err, session.ErrNotFound) && sid == DefaultSession {
				return fn(nil) // not created yet: no commands
			}
			return w.explain(err)
		}
		if len(page) == 0 {
			return nil
		}
		if err := fn(commandInfos(page)); err != nil {
			return err
		}
		n, _ := strconv.ParseUint(page[len(page)-1].ID, 10, 64)
		if n <= after || len(page) < wire.MaxHistoryPage {
			return nil
		}
		after = n
	}
}

// Command returns one command's record.
func (m *Manager) Command(ctx context.Context, idOrName, sid, cid string) (CommandInfo, error) {
	if err := session.ValidateID(sid); err != nil {
		return CommandInfo{}, err
	}
	w, err := m.ready(ctx, idOrName)
	if err != nil {
		return CommandInfo{}, err
	}
	c, err := w.client()
	if err != nil {
		cache, cerr := w.readCache()
		if cerr != nil {
			return CommandInfo{}, err
		}
		for _, ci := range cache.History[sid] {
			if ci.ID == cid {
				return commandInfo(ci), nil
			}
		}
		return CommandInfo{}, fmt.Errorf("%w: command %s in session %s", session.ErrNotFound, cid, sid)
	}
	ci, err := c.Command(ctx, sid, cid)
	return commandInfo(ci), w.explain(err)
}

// historyCache is what a stopped workspace shows of its sessions: saved
// when it stops, bounded. It keeps the agent's answers as they came (its
// JSON is theirs); they become the domain's values as they are read.
type historyCache struct {
	SavedAt  time.Time                        `json:"saved_at"`
	Sessions []session.Info                   `json:"sessions"`
	History  map[string][]session.CommandInfo `json:"history"`
}

// maxCachedCommands bounds the history kept per session while stopped.
const maxCachedCommands = 10_000

const cacheFile = "history.json"

// saveCache asks the agent for the sessions and their history and keeps
// them for while the workspace is stopped (best effort, bounded in time).
func (w *workspace) saveCache(ctx context.Context, c *agent.Client) {
	ctx, cancel := context.WithTimeout(ctx, agentQueryTimeout)
	defer cancel()
	// The sessions' latest state first (a session snapshots at most once
	// a second on its own).
	if err := c.FlushSnapshots(ctx); err != nil {
		w.m.log.Debug("stop: flush the sessions' snapshots", "workspace_id", w.id(), "err", err)
	}
	infos, err := c.Sessions(ctx)
	if err != nil {
		return
	}
	hc := historyCache{SavedAt: time.Now().UTC(), Sessions: infos, History: map[string][]session.CommandInfo{}}
	for _, inf := range infos {
		var all []session.CommandInfo
		var after uint64
		for {
			page, err := c.History(ctx, inf.ID, after, wire.MaxHistoryPage)
			if err != nil || len(page) == 0 {
				break
			}
			all = append(all, page...)
			if len(all) > maxCachedCommands {
				all = all[len(all)-maxCachedCommands:]
			}
			n, _ := strconv.ParseUint(page[len(page)-1].ID, 10, 64)
			if n <= after || len(page) < wire.MaxHistoryPage {
				break
			}
			after = n
		}
		hc.History[inf.ID] = all
	}
	if err := writeJSONFile(filepath.Join(w.dir, cacheFile), hc); err != nil {
		w.m.log.Warn("save the sessions' history", "workspace_id", w.id(), "err", err)
	}
}

func (w *workspace) readCache() (historyCache, error) {
	var hc historyCache
	b, err := os.ReadFile(filepath.Join(w.dir, cacheFile))
	if err != nil {
		return hc, err
	}
	return hc, jsonUnmarshal(b, &hc)
}

// logCommand queues a command for the workspace's log.
func (w *workspace) logCommand(sid, text string, res session.ExecResult) {
	w.mu.Lock()
	l := w.log
	w.mu.Unlock()
	if l == nil {
		return
	}
	code := res.ExitCode
	ev := worktree.Event{Kind: worktree.EventCommand, Message: "[" + sid + "] " + text}
	if code >= 0 {
		ev.ExitCode = &code
	}
	if res.TimedOut {
		ev.Message += " (timed out)"
	}
	l.add(ev)
}
