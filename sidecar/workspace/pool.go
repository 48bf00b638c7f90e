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

// The warm pool (Config.WarmPool, Config.WarmTemplates): workspaces
// created ahead, container started, agent up and the first session
// ("default") started, of the default settings (no repository, the
// default image, limits, disk and network policy, no env or secrets) or
// of a template's (its image and env, else the defaults). A create of the
// default image or a pooled template (by name, or by image: the same
// template under another name, as a repository's devcontainer.json names
// it by content), of the default limits and disk and of no placement,
// takes one: for a repository, its branch is made with the pooled
// workspace's id and its base's objects are shipped to it (attachRepo,
// ship.go); it is given the request's env, secret env, secrets, idle stop
// and network policy while still hidden (applyToPooled), then its name;
// the pool refills in the background, two creates at a time. A pooled workspace is hidden (no lookup, no list)
// until it is taken, has run nothing of a user before, and once taken is
// an ordinary workspace: never back in the pool. At start, pooled
// workspaces left by an earlier run (a kill -9) are deleted and the pool
// made anew: nothing of a run is handed out by the next. A template's
// pooled workspaces are deleted before the template is removed
// (ReleaseTemplate), and one made from an image the template no longer
// names is never handed out.

// MaxWarmPool bounds the warm pool, all templates together: each pooled
// workspace holds a container (init, agent: a few MB at rest) and its
// disk.
const MaxWarmPool = 256

// poolRetry is how long a failing fill waits before trying again.
const poolRetry = 5 * time.Second

// poolFillers bounds the pool's creates under way: a refill after a burst
// of takes is background work, and must not starve the taken workspaces'
// first commands of the engine and CPUs (with 100 at once, a burst's p95
// to first exec was 1.10 s; see README "Density and bursts").
const poolFillers = 2

type pooledKey struct{}

// errPooledGone: a pooled workspace taken out was deleted meanwhile (the
// pool drained at Close).
var errPooledGone = errors.New("the pooled workspace is gone")

// pool holds the pooled workspaces ready to be taken.
type pool struct {
	// want is how many to keep of each template ("": the default image).
	want map[string]int
	mu   sync.Mutex
	// ready are pooled workspaces, oldest first; filling counts the
	// creates under way, by template; released are templates being
	// removed (not filled meanwhile); retryAt are templates whose last
	// fill failed, not filled again before then (the others are; the
	// failure is logged once until a fill succeeds).
	ready    []*workspace
	filling  map[string]int
	released map[string]int
	retryAt  map[string]time.Time
	wake     chan struct{}
}

func newPool(defaults int, templates map[string]int) *pool {
	p := &pool{want: map[string]int{}, filling: map[string]int{}, released: map[string]int{}, retryAt: map[string]time.Time{}, wake: make(chan struct{}, 1)}
	left := MaxWarmPool
	if defaults > 0 {
		p.want[""] = min(defaults, left)
		left -= p.want[""]
	}
	for _, name := range slices.Sorted(maps.Keys(templates)) {
		if n := min(templates[name], left); n > 0 && name != "" {
			p.want[name] = n
			left -= n
		}
	}
	if len(p.want) == 0 {
		return nil
	}
	return p
}

// size is how many the pool keeps, all templates together.
func (p *pool) size() int {
	n := 0
	for _, k := range p.want {
		n += k
	}
	return n
}

// next is the template a fill should make a workspace of (ok false:
// none wanted, or enough under way). Called with p.mu held.
func (p *pool) next() (string, bool) {
	total := 0
	for _, n := range p.filling {
		total += n
	}
	if total >= poolFillers {
		return "", false
	}
	best, most := "", 0
	now := time.Now()
	for _, name := range slices.Sorted(maps.Keys(p.want)) {
		if p.released[name] > 0 || now.Before(p.retryAt[name]) {
			continue
		}
		if d := p.short(name); d > most {
			best, most = name, d
		}
	}
	return best, most > 0
}

// short is how many workspaces of template tpl the pool lacks, counting
// those being made. Called with p.mu held.
func (p *pool) short(tpl string) int {
	n := p.want[tpl] - p.filling[tpl]
	for _, w := range p.ready {
		if w.template() == tpl {
			n--
		}
	}
	return n
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
	filling := 0
	for _, n := range p.filling {
		filling += n
	}
	return PoolStatus{Size: p.size(), Ready: len(p.ready), Filling: filling, Taken: m.poolTaken.Load()}
}

// template is the template w was made from ("": none).
func (w *workspace) template() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.meta.Template
}

// templateImage is the image id of the template it was made of.
func (w *workspace) templateImage() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.meta.TemplateImage
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
		tpl, fill := p.next()
		if fill {
			p.filling[tpl]++
		}
		p.mu.Unlock()
		if fill {
			go m.fillOne(tpl)
			continue
		}
		select {
		case <-p.wake:
		case <-m.bg.Done():
			return
		}
	}
}

// fillOne creates one pooled workspace of a template ("": the default
// image).
func (m *Manager) fillOne(tpl string) {
	p := m.pool
	w, err := m.createPooled(tpl)
	p.mu.Lock()
	keep := err == nil && p.released[tpl] == 0
	if keep {
		p.ready = append(p.ready, w)
	}
	_, failed := p.retryAt[tpl]
	first := err != nil && !failed
	if err != nil {
		p.retryAt[tpl] = time.Now().Add(poolRetry)
	} else {
		delete(p.retryAt, tpl)
	}
	p.mu.Unlock()
	if err == nil && !keep {
		// Its template is being removed (ReleaseTemplate waits for this
		// fill): gone before the fill counts as done.
		ctx, cancel := context.WithTimeout(m.bg, lifecycleTimeout)
		_ = w.changeLocked(ctx, func(ctx context.Context) error { return w.delete(ctx, false) })
		cancel()
	}
	p.mu.Lock()
	p.filling[tpl]--
	p.mu.Unlock()
	if keep {
		st := m.Pool()
		m.log.Info("warm pool", "template", tpl, "ready", st.Ready, "size", st.Size, "filling", st.Filling, "taken", st.Taken)
	}
	if err != nil {
		// Once until a fill succeeds: a template not built yet (or
		// removed) would say so every few seconds.
		if m.bg.Err() == nil && first {
			m.log.Warn("pool: create a pooled workspace; trying again every few seconds", "template", tpl, "err", err)
		}
		time.AfterFunc(poolRetry, p.kick) // its retry time: the others fill meanwhile
	}
	p.kick()
}

func (p *pool) kick() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// createPooled creates a workspace of the default settings, or of a
// template's, hidden.
func (m *Manager) createPooled(tpl string) (*workspace, error) {
	ctx, cancel := context.WithTimeout(context.WithValue(m.bg, pooledKey{}, true), lifecycleTimeout)
	defer cancel()
	req := CreateRequest{Name: "pool-" + randomHex(6), Template: tpl}
	if err := m.validateCreate(&req); err != nil {
		return nil, err
	}
	if err := m.checkDisk(ctx, &req.DiskMB); err != nil {
		return nil, err
	}
	t, err := m.createTemplate(ctx, &req, false)
	if err != nil {
		return nil, err
	}
	req.Template = t.Name
	req.templateImage = t.ImageID
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

// takePooled gives a create a pooled workspace when its template (or
// image), limits and disk are a pooled one's (ok false: create one).
func (m *Manager) takePooled(ctx context.Context, req CreateRequest) (Info, bool, error) {
	p := m.pool
	if p == nil || len(req.Placement) > 0 || req.Network == nil {
		return Info{}, false, nil
	}
	p.mu.Lock()
	_, wanted := p.want[req.Template]
	for _, c := range p.ready {
		// A template of the same image under another name: a
		// repository's devcontainer.json makes its template's content
		// name (dc-…), which the template an operator built and named from
		// it is.
		wanted = wanted || (req.templateImage != "" && c.templateImage() == req.templateImage)
	}
	p.mu.Unlock()
	if !wanted {
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
	var stale []*workspace
	p.mu.Lock()
	p.ready = slices.DeleteFunc(p.ready, func(c *workspace) bool {
		// Pooled from an image the template no longer names (removed and
		// made again): never handed out, made anew.
		c.mu.Lock()
		old := req.Template != "" && c.meta.Template == req.Template && c.meta.TemplateImage != req.templateImage
		c.mu.Unlock()
		if old {
			stale = append(stale, c)
		}
		return old
	})
	for i, c := range p.ready {
		c.mu.Lock()
		md := c.meta
		c.mu.Unlock()
		// Its image, limits and disk are its container's (a template's
		// image the one the template names now); its network policy can
		// be narrowed or widened unless it was made with none (no network
		// at all).
		sameImage := md.Template == req.Template && md.Image == req.Image
		if req.templateImage != "" { // under whichever of its names
			sameImage = md.TemplateImage == req.templateImage
		}
		if sameImage && md.MemoryMB == req.MemoryMB && md.CPUs == req.CPUs && md.PidsLimit == req.PidsLimit &&
			md.DiskMB == req.DiskMB && (md.Network == req.Network.Mode || md.Network != NetworkNone) {
			w = c
			p.ready = append(p.ready[:i:i], p.ready[i+1:]...)
			break
		}
	}
	p.mu.Unlock()
	for _, c := range stale {
		m.discardPooled(c)
	}
	if len(stale) > 0 {
		p.kick()
	}
	if w == nil {
		return Info{}, false, nil
	}
	if req.Repo != "" {
		// Its branch first: a create the repository refuses (a name or
		// base it will not take) gets the repository's answer, and the
		// pooled workspace, untouched, goes back.
		attached, err := m.attachRepo(ctx, w, req, name)
		switch {
		case errors.Is(err, errPooledGone):
			return Info{}, false, nil // the create makes its own
		case err != nil && !attached:
			p.mu.Lock()
			// Not while its template is being removed, nor beyond the
			// pool's size (a fill may have replaced it meanwhile).
			tpl := w.template()
			back := p.released[tpl] == 0 && p.short(tpl) > 0
			if back {
				p.ready = append([]*workspace{w}, p.ready...)
			}
			p.mu.Unlock()
			if !back {
				m.discardPooled(w)
			}
			return Info{}, true, err
		case err != nil:
			// Its record could not be saved: gone (with its branch)
			// before the create makes its own of that name.
			m.log.Warn("pool: give a pooled workspace the create's repository; making one instead", "workspace_id", w.id(), "err", err)
			m.deletePooled(w)
			return Info{}, false, nil
		}
	}
	defer p.kick()
	// The request's own settings first, while it is still hidden: a
	// failure discards it and the create makes its own.
	err := w.changeLocked(ctx, func(ctx context.Context) error { return m.applyToPooled(ctx, w, req) })
	if err == nil && req.Repo != "" {
		// Its base's history, after its policy, under the create's own
		// deadline (ship.go's: a large history takes longer than a
		// lifecycle change may), as any repository create's.
		var unlock func()
		if unlock, err = w.lock(ctx); err == nil {
			err = w.gitInit(ctx, false)
			unlock()
		}
	}
	if err != nil {
		m.log.Warn("pool: give a pooled workspace the create's settings; making one instead", "workspace_id", w.id(), "err", err)
		m.dropSecrets(w.id())
		if req.Repo != "" {
			m.deletePooled(w) // its branch gone before the create makes its own
		} else {
			m.discardPooled(w)
		}
		return Info{}, false, nil
	}
	err = w.changeLocked(ctx, func(ctx context.Context) error {
		w.mu.Lock()
		old := w.meta.Name
		w.meta.Name = name
		w.meta.Template, w.meta.Image = req.Template, req.Image // the names the create used
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
	if req.Repo == "" { // the worktree package logs a repository workspace's creation
		w.log.add(worktree.Event{Kind: worktree.EventCreated, Message: fmt.Sprintf("workspace %s (image %s, from the warm pool)", name, w.meta.Image)})
	}
	m.log.Info("workspace created from the warm pool", "workspace_id", w.meta.ID, "name", name)
	return w.view(), true, nil
}

// attachRepo makes a repository create's branch (patina/<name>, at its
// base) for a pooled workspace, with the pooled workspace's id, and makes
// the workspace that repository's (saved: a restart that finds it pooled
// deletes its branch with it). Its files are in its own volume and its
// base's objects are shipped to it by gitInit (ship.go), as on an engine
// of another host: its container was made before the repository was
// named. attached false: nothing was done to the workspace (the
// repository refused, or it was deleted meanwhile: the pool drained).
func (m *Manager) attachRepo(ctx context.Context, w *workspace, req CreateRequest, name string) (attached bool, err error) {
	r, err := m.repo(ctx, req.Repo)
	if err != nil {
		return false, repoError(req.Repo, err)
	}
	unlock, err := w.lock(ctx)
	if err != nil {
		return false, fmt.Errorf("%w: %w", errPooledGone, err)
	}
	defer unlock()
	w.mu.Lock()
	id := w.meta.ID
	w.mu.Unlock()
	wt, err := r.Create(ctx, worktree.CreateRequest{Name: name, ID: id, Base: req.Base, Image: req.Image})
	if errors.Is(err, worktree.ErrNotFound) {
		err = fieldError("base", err) // a field names nothing: 400, not 404
	}
	if err != nil {
		return false, err
	}
	w.mu.Lock()
	w.repo = r
	w.meta.Repo, w.meta.Branch, w.meta.Base, w.meta.BaseCommit = wt.Repo, wt.Branch, wt.BaseRef, wt.BaseCommit
	if w.meta.Base == "" {
		w.meta.Base = req.Base
	}
	w.meta.Shipped = true
	// Its events now go with the repository's (its state note), as a
	// repository workspace's do.
	old := w.log
	w.log = newEventLog(w.sink(), m.log, m.cfg.Redactor.Redact)
	w.mu.Unlock()
	if old != nil {
		old.close()
	}
	return true, w.save(ctx)
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
	c, err := w.client()
	if err != nil {
		return err
	}
	var env map[string]string
	if setup := w.agentSetup(); setup != nil {
		warning, err := c.Setup(ctx, setup)
		if err != nil {
			return err
		}
		env = maps.Clone(setup.Env)
		if setup.Trust != nil && warning == "" {
			maps.Copy(env, setup.Trust.Env)
		}
		if warning != "" {
			m.log.Warn("pool: the agent's setup", "workspace_id", md.ID, "warning", warning)
		}
	}
	// A saved workspace's template brings sessions whose shells ended with
	// the workspace it was saved from: each gets a new one with its state
	// (as a fork's), after the setup, so that the create's environment
	// reaches every one.
	if _, err := c.Revive(ctx, ""); err != nil {
		return err
	}
	if env != nil {
		// The first session, started in the pool before the setup.
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

// TemplateUsers names, sorted, the workspaces made of template name that
// were given out (not pooled ones): removing the template while one of
// them is there is refused without touching its pool.
func (m *Manager) TemplateUsers(name string) []string {
	var out []string
	for _, w := range m.all() {
		w.mu.Lock()
		if !w.meta.Pooled && !w.deleted && w.meta.Template == name {
			out = append(out, w.meta.Name)
		}
		w.mu.Unlock()
	}
	slices.Sort(out)
	return out
}

// ReleaseTemplate deletes the template's pooled workspaces, and fills
// none of it until the returned func is called: the template can then be
// removed (a pooled workspace's container would hold its image).
func (m *Manager) ReleaseTemplate(ctx context.Context, name string) func() {
	p := m.pool
	if p == nil {
		return func() {}
	}
	p.mu.Lock()
	p.released[name]++
	var gone []*workspace
	p.ready = slices.DeleteFunc(p.ready, func(w *workspace) bool {
		if w.template() == name {
			gone = append(gone, w)
			return true
		}
		return false
	})
	p.mu.Unlock()
	for _, w := range gone {
		// Not cancelled with the caller: a workspace out of the pool and
		// not deleted would hold the template's image until a restart.
		dctx, cancel := context.WithTimeout(m.bg, lifecycleTimeout)
		if err := w.changeLocked(dctx, func(ctx context.Context) error { return w.delete(ctx, false) }); err != nil {
			m.log.Warn("pool: delete a pooled workspace of a template being removed", "template", name, "workspace_id", w.id(), "err", err)
		}
		cancel()
	}
	// A fill of it under way ends in a discard (fillOne); wait for it.
	for {
		p.mu.Lock()
		n := p.filling[name]
		p.mu.Unlock()
		if n == 0 || ctx.Err() != nil {
			break
		}
		select {
		case <-time.After(poolWaitStep):
		case <-ctx.Done():
		}
	}
	return func() {
		p.mu.Lock()
		if p.released[name]--; p.released[name] <= 0 {
			delete(p.released, name)
		}
		p.mu.Unlock()
		p.kick()
	}
}

// poolWaitStep is how often ReleaseTemplate looks whether a fill of the
// template is still under way.
const poolWaitStep = 50 * time.Millisecond

// discardPooled deletes a pooled workspace taken out and not given, in
// the background.
func (m *Manager) discardPooled(w *workspace) { go m.deletePooled(w) }

// deletePooled deletes a pooled workspace taken out and not given (with
// the branch a repository create made for it).
func (m *Manager) deletePooled(w *workspace) {
	ctx, cancel := context.WithTimeout(m.bg, lifecycleTimeout)
	defer cancel()
	if err := w.changeLocked(ctx, func(ctx context.Context) error { return w.delete(ctx, false) }); err != nil {
		m.log.Warn("pool: delete a pooled workspace not given out", "workspace_id", w.id(), "err", err)
	}
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
