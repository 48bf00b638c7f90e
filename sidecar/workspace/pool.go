package workspace

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/sidecar/agent/wire"
	"github.com/patina-dev/patina/worktree"
)

// The warm pool (Config.WarmPool): workspaces of the default settings
// (no repository, the default image, limits, disk and network policy, no
// env or secrets) created ahead, container started, agent up and the
// first session ("default") started. A create of no repository or
// template, of the default image, limits and disk takes one: it is given
// the request's env, secret env, secrets, idle stop and network policy
// while still hidden (applyToPooled), then its name; the pool refills in
// the background, two creates at a time. A pooled workspace
// is hidden (no lookup, no list) until it is taken, has run nothing of a
// user before, and once taken is an ordinary workspace: never back in
// the pool. At start, pooled workspaces left by an earlier run (a kill
// -9) are deleted and the pool made anew: nothing of a run is handed out
// by the next.

// MaxWarmPool bounds Config.WarmPool: each pooled workspace holds a
// container (init, agent: a few MB at rest) and its disk.
const MaxWarmPool = 256

// poolRetry is how long a failing fill waits before trying again.
const poolRetry = 5 * time.Second

// poolFillers bounds the pool's creates under way: a refill after a burst
// of takes is background work, and must not starve the taken workspaces'
// first commands of the engine and CPUs (with 100 at once, a burst's p95
// to first exec was 1.10 s; see README "Density and bursts").
const poolFillers = 2

type pooledKey struct{}

// pool holds the pooled workspaces ready to be taken.
type pool struct {
	size int
	mu   sync.Mutex
	// ready are pooled workspaces, oldest first; filling counts the
	// creates under way.
	ready   []*workspace
	filling int
	wake    chan struct{}
}

// PoolStatus reports the warm pool.
type PoolStatus struct {
	Size, Ready, Filling int
	Taken                int64
}

// Pool reports the warm pool (zero without one).
func (m *Manager) Pool() PoolStatus {
	p := m.pool
	if p == nil {
		return PoolStatus{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return PoolStatus{Size: p.size, Ready: len(p.ready), Filling: p.filling, Taken: m.poolTaken.Load()}
}

// isPooled reports whether w waits in the pool (hidden).
func (w *workspace) isPooled() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.meta.Pooled
}

// runPool deletes what an earlier run left pooled, once adoption is
// done, then keeps the pool full until the Manager closes.
func (m *Manager) runPool(adopted <-chan struct{}) {
	select {
	case <-adopted:
	case <-m.bg.Done():
		return
	}
	for _, w := range m.all() {
		if w.isPooled() {
			ctx, cancel := context.WithTimeout(m.bg, lifecycleTimeout)
			if err := w.changeLocked(ctx, func(ctx context.Context) error { return w.delete(ctx, false) }); err != nil {
				m.log.Warn("pool: delete a pooled workspace of an earlier run", "workspace_id", w.meta.ID, "err", err)
			}
			cancel()
		}
	}
	p := m.pool
	for {
		p.mu.Lock()
		fill := p.size-len(p.ready)-p.filling > 0 && p.filling < poolFillers
		if fill {
			p.filling++
		}
		p.mu.Unlock()
		if fill {
			go m.fillOne()
			continue
		}
		select {
		case <-p.wake:
		case <-m.bg.Done():
			return
		}
	}
}

// fillOne creates one pooled workspace.
func (m *Manager) fillOne() {
	p := m.pool
	w, err := m.createPooled()
	p.mu.Lock()
	p.filling--
	if err == nil {
		p.ready = append(p.ready, w)
	}
	p.mu.Unlock()
	if err == nil {
		st := m.Pool()
		m.log.Info("warm pool", "ready", st.Ready, "size", st.Size, "filling", st.Filling, "taken", st.Taken)
	}
	if err != nil {
		if m.bg.Err() == nil {
			m.log.Warn("pool: create a pooled workspace", "err", err)
		}
		select {
		case <-time.After(poolRetry):
		case <-m.bg.Done():
			return
		}
	}
	p.kick()
}

func (p *pool) kick() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// createPooled creates a workspace of the default settings, hidden.
func (m *Manager) createPooled() (*workspace, error) {
	ctx, cancel := context.WithTimeout(context.WithValue(m.bg, pooledKey{}, true), lifecycleTimeout)
	defer cancel()
	req := CreateRequest{Name: "pool-" + randomHex(6)}
	if err := m.validateCreate(&req); err != nil {
		return nil, err
	}
	if err := m.checkDisk(ctx, &req.DiskMB); err != nil {
		return nil, err
	}
	v, err := m.create(ctx, req, nil)
	if err != nil {
		return nil, err
	}
	m.mu.RLock()
	w := m.workspaces[v.ID]
	m.mu.RUnlock()
	if w == nil {
		return nil, fmt.Errorf("pooled workspace %s vanished", v.ID)
	}
	// Its first session ready too: a create that takes it runs its first
	// command without a shell start. The session has run nothing: its
	// history is empty, its state the image's.
	c, err := w.client()
	if err == nil {
		_, err = c.CreateSession(ctx, wire.CreateSessionRequest{ID: DefaultSession})
	}
	if err != nil && !errors.Is(err, session.ErrExists) {
		m.discardPooled(w)
		return nil, fmt.Errorf("start the first session of pooled workspace %s: %w", v.ID, w.explain(err))
	}
	return w, nil
}

// takePooled gives a create a pooled workspace when its image, limits
// and disk are a pooled one's (ok false: create one).
func (m *Manager) takePooled(ctx context.Context, req CreateRequest) (Info, bool, error) {
	p := m.pool
	if p == nil || req.Repo != "" || req.Template != "" || req.Dockerfile != "" || len(req.Placement) > 0 || req.Network == nil {
		return Info{}, false, nil
	}
	// The name first: a create whose name is taken costs no pooled
	// workspace.
	name := req.Name
	if name == "" {
		name = "ws-" + randomHex(4)
	}
	if err := m.reserve(name); err != nil {
		return Info{}, true, err
	}
	defer m.unreserve(name)
	var w *workspace
	p.mu.Lock()
	for i, c := range p.ready {
		c.mu.Lock()
		md := c.meta
		c.mu.Unlock()
		// Its image, limits and disk are its container's; its network
		// policy can be narrowed or widened unless it was made with none
		// (no network at all).
		if md.Image == req.Image && md.MemoryMB == req.MemoryMB && md.CPUs == req.CPUs && md.PidsLimit == req.PidsLimit &&
			md.DiskMB == req.DiskMB && (md.Network == req.Network.Mode || md.Network != NetworkNone) {
			w = c
			p.ready = append(p.ready[:i:i], p.ready[i+1:]...)
			break
		}
	}
	p.mu.Unlock()
	if w == nil {
		return Info{}, false, nil
	}
	defer p.kick()
	// The request's own settings first, while it is still hidden: a
	// failure discards it and the create makes its own.
	if err := w.changeLocked(ctx, func(ctx context.Context) error { return m.applyToPooled(ctx, w, req) }); err != nil {
		m.log.Warn("pool: give a pooled workspace the create's settings; making one instead", "workspace_id", w.meta.ID, "err", err)
		m.dropSecrets(w.meta.ID)
		m.discardPooled(w)
		return Info{}, false, nil
	}
	err := w.changeLocked(ctx, func(ctx context.Context) error {
		w.mu.Lock()
		old := w.meta.Name
		w.meta.Name = name
		w.meta.Pooled = false
		w.touch() // its idle stop counts from now, not from its making
		w.meta.CreatedAt = time.Now().UTC()
		w.mu.Unlock()
		if err := w.save(ctx); err != nil {
			return err
		}
		m.mu.Lock()
		if m.names[old] == w.meta.ID {
			delete(m.names, old)
		}
		m.names[name] = w.meta.ID
		m.mu.Unlock()
		return nil
	})
	if err != nil {
		m.discardPooled(w)
		return Info{}, true, err
	}
	m.poolTaken.Add(1)
	w.log.add(worktree.Event{Kind: worktree.EventCreated, Message: fmt.Sprintf("workspace %s (image %s, from the warm pool)", name, w.meta.Image)})
	m.log.Info("workspace created from the warm pool", "workspace_id", w.meta.ID, "name", name)
	return w.view(), true, nil
}

// applyToPooled gives a pooled workspace, still hidden, the create's
// environment, secret environment and secrets (through its agent's setup,
// for its new shells, and exported in its first session, started in the
// pool), idle stop and network policy.
func (m *Manager) applyToPooled(ctx context.Context, w *workspace, req CreateRequest) error {
	w.mu.Lock()
	w.meta.Env, w.meta.SecretEnv, w.meta.Secrets = req.Env, req.SecretEnv, grantsFor(req.Secrets)
	w.meta.EnvBySetup = len(req.Env) > 0
	w.meta.IdleStop = req.IdleStop
	oldNet, oldAllow := w.meta.Network, w.meta.NetworkAllow
	w.meta.Network, w.meta.NetworkAllow = req.Network.Mode, req.Network.Allow
	md := w.meta
	w.mu.Unlock()
	// The policy first, then what the user's secrets are.
	if md.Network != oldNet || !slices.Equal(md.NetworkAllow, oldAllow) {
		if err := w.applyNetwork(ctx); err != nil {
			return err
		}
	}
	m.holdSecrets(md)
	if setup := w.agentSetup(); setup != nil {
		c, err := w.client()
		if err != nil {
			return err
		}
		warning, err := c.Setup(ctx, setup)
		if err != nil {
			return err
		}
		env := maps.Clone(setup.Env)
		if setup.Trust != nil && warning == "" {
			maps.Copy(env, setup.Trust.Env)
		}
		if warning != "" {
			m.log.Warn("pool: the agent's setup", "workspace_id", md.ID, "warning", warning)
		}
		if _, err := c.SetEnv(ctx, DefaultSession, env, nil); err != nil {
			// A variable its shell will not take (bash's read-only UID, say):
			// the first session goes, and the first exec starts it anew
			// with the setup's environment, as in any workspace.
			m.log.Debug("pool: export the create's environment in the first session; ending it instead", "workspace_id", md.ID, "err", err)
			if err := c.RemoveSession(ctx, DefaultSession); err != nil {
				return err
			}
		}
	}
	return w.save(ctx)
}

// discardPooled deletes a pooled workspace taken out and not given.
func (m *Manager) discardPooled(w *workspace) {
	go func() {
		ctx, cancel := context.WithTimeout(m.bg, lifecycleTimeout)
		defer cancel()
		_ = w.changeLocked(ctx, func(ctx context.Context) error { return w.delete(ctx, false) })
	}()
}

// drainPoolTimeout bounds deleting the pool at Close.
const drainPoolTimeout = 30 * time.Second

// drainPool deletes the pooled workspaces (Close): they are nobody's, and
// the next run makes its own.
func (m *Manager) drainPool() {
	if m.pool == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), drainPoolTimeout)
	defer cancel()
	for _, w := range m.all() {
		if w.isPooled() {
			_ = w.changeLocked(ctx, func(ctx context.Context) error { return w.delete(ctx, false) })
		}
	}
}
