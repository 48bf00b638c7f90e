package workspace

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/patina-dev/patina/sidecar/agent"
	"github.com/patina-dev/patina/worktree"
)

// Manager keeps the workspaces of one state directory.
type Manager struct {
	cfg    Config
	log    *slog.Logger
	eng    Engine
	images Images
	wtCfg  worktree.Config
	bg     context.Context // background work: adoption, watching
	stop   context.CancelFunc

	mu         sync.RWMutex
	workspaces map[string]*workspace // by id
	names      map[string]string     // name -> id
	reserved   map[string]bool       // names being created
	repos      map[string]*worktree.Repo
	stores     *objectStores
	pool       *pool // nil: no warm pool
	poolTaken  atomic.Int64
}

// New prepares a Manager; Adopt finds the workspaces of a previous run.
func New(cfg Config, eng Engine, images Images) (*Manager, error) {
	cfg = cfg.withDefaults()
	if cfg.StateDir == "" {
		return nil, fmt.Errorf("workspace: %w: a state directory is required", ErrInvalid)
	}
	abs, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	cfg.StateDir = abs
	// What workspaces write lands below these: no other host user may reach
	// it (a setuid file, a symlink to follow).
	for _, d := range []string{"workspaces", "worktrees", objectsDir} {
		p := filepath.Join(abs, d)
		if err := os.MkdirAll(p, 0o700); err != nil {
			return nil, fmt.Errorf("workspace: state directory: %w", err)
		}
		if err := os.Chmod(p, 0o700); err != nil {
			return nil, fmt.Errorf("workspace: state directory: %w", err)
		}
	}
	bg, stop := context.WithCancel(context.Background())
	m := &Manager{
		cfg:        cfg,
		log:        cfg.Logger.With("component", "workspace"),
		eng:        eng,
		images:     images,
		bg:         bg,
		stop:       stop,
		workspaces: map[string]*workspace{},
		names:      map[string]string{},
		reserved:   map[string]bool{},
		repos:      map[string]*worktree.Repo{},
	}
	m.pool = newPool(cfg.WarmPool, cfg.WarmTemplates)
	m.wtCfg = worktree.Config{StateDir: abs, Author: cfg.GitAuthor, Logger: cfg.Logger}
	m.stores = newObjectStores(filepath.Join(abs, objectsDir), m.log, m.objectsInUse)
	return m, nil
}

// objectsInUse reports whether a known workspace borrows from an object
// store's directory.
func (m *Manager) objectsInUse(objects string) bool {
	for _, w := range m.all() {
		w.mu.Lock()
		used := containsString(w.meta.Objects, objects)
		w.mu.Unlock()
		if used {
			return true
		}
	}
	return false
}

// Close lets go of every workspace without stopping it: containers,
// agents, shells and running commands carry on for the next Manager.
func (m *Manager) Close() {
	m.stop()
	m.drainPool()
	for _, w := range m.all() {
		w.release()
	}
}

// all returns the workspaces known now, in no order.
func (m *Manager) all() []*workspace {
	m.mu.RLock()
	wss := make([]*workspace, 0, len(m.workspaces))
	for _, w := range m.workspaces {
		wss = append(wss, w)
	}
	m.mu.RUnlock()
	return wss
}

// lookup finds a workspace by id or name.
func (m *Manager) lookup(idOrName string) (*workspace, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	w, ok := m.workspaces[idOrName]
	if !ok {
		if id, named := m.names[idOrName]; named {
			w, ok = m.workspaces[id], true
		}
	}
	if ok && !w.isPooled() {
		return w, nil
	}
	return nil, fmt.Errorf("%w: no workspace %q", ErrNotFound, idOrName)
}

// List describes every workspace, oldest first.
func (m *Manager) List() []Info {
	wss := m.all()
	out := make([]Info, 0, len(wss))
	for _, w := range wss {
		if !w.isPooled() {
			out = append(out, w.view())
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Get describes one workspace.
func (m *Manager) Get(idOrName string) (Info, error) {
	w, err := m.lookup(idOrName)
	if err != nil {
		return Info{}, err
	}
	return w.view(), nil
}

// reserve claims a workspace name; release with unreserve.
func (m *Manager) reserve(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.names[name]; ok || m.reserved[name] {
		return fmt.Errorf("%w: a workspace named %q exists: choose another name, or delete that one first", ErrExists, name)
	}
	if _, ok := m.workspaces[name]; ok {
		return fmt.Errorf("%w: %q is a workspace id", ErrExists, name)
	}
	m.reserved[name] = true
	return nil
}

func (m *Manager) unreserve(name string) {
	m.mu.Lock()
	delete(m.reserved, name)
	m.mu.Unlock()
}

// register makes a workspace known (its secrets too).
func (m *Manager) register(w *workspace) {
	w.mu.Lock()
	md := w.meta
	w.mu.Unlock()
	m.holdSecrets(md)
	m.mu.Lock()
	m.workspaces[md.ID] = w
	m.names[md.Name] = md.ID
	m.mu.Unlock()
}

func (m *Manager) unregister(w *workspace) {
	m.mu.Lock()
	delete(m.workspaces, w.meta.ID)
	if m.names[w.meta.Name] == w.meta.ID {
		delete(m.names, w.meta.Name)
	}
	m.mu.Unlock()
	m.dropSecrets(w.meta.ID)
}

// repo opens (once) the user's repository at path.
func (m *Manager) repo(ctx context.Context, path string) (*worktree.Repo, error) {
	m.mu.RLock()
	r, ok := m.repos[path]
	m.mu.RUnlock()
	if ok {
		return r, nil
	}
	r, err := worktree.Open(ctx, m.wtCfg, path)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if prev, ok := m.repos[r.Root()]; ok {
		m.repos[path] = prev
		return prev, nil
	}
	m.repos[path] = r
	m.repos[r.Root()] = r
	return r, nil
}

// agentFor finds a running workspace (waiting for its adoption) and the
// client of its agent.
func (m *Manager) agentFor(ctx context.Context, idOrName string) (*workspace, *agent.Client, error) {
	w, c, _, err := m.agentResuming(ctx, idOrName)
	return w, c, err
}

// agentResuming is agentFor that also says whether the workspace had to be
// resumed after an idle stop.
func (m *Manager) agentResuming(ctx context.Context, idOrName string) (*workspace, *agent.Client, bool, error) {
	w, err := m.ready(ctx, idOrName)
	if err != nil {
		return nil, nil, false, err
	}
	resumed, err := w.resumeIfIdle(ctx)
	if err != nil {
		return nil, nil, false, err
	}
	c, err := w.client()
	if err != nil {
		return nil, nil, false, err
	}
	return w, c, resumed, nil
}

// ready finds a workspace whose adoption is over.
func (m *Manager) ready(ctx context.Context, idOrName string) (*workspace, error) {
	w, err := m.lookup(idOrName)
	if err != nil {
		return nil, err
	}
	if err := w.waitAdopted(ctx, m.cfg.AdoptWait); err != nil {
		return nil, err
	}
	w.touch()
	return w, nil
}

// writeFileAtomic writes a file through a temporary one and a rename:
// readers never see half of it, and a crash leaves the old one.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(path, append(b, '\n'), 0o600)
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}

// timeout returns ctx bounded by d (and ctx's own deadline).
func timeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}
