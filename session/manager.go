package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Manager owns the sessions under one directory. Only one live Manager may
// hold a directory at a time (a lock file enforces it); when its process
// dies, a new Manager opened on the directory reattaches to the sessions.
type Manager struct {
	cfg     Config
	log     *slog.Logger
	lock    *os.File
	watches watchHub
	// extraEnv is added to Config.Env for shells started from now on
	// (SetExtraEnv).
	extraEnv atomic.Pointer[[]string]

	// recovering serialises Recover and Restart: two callers must not
	// both start a new shell for one session.
	recovering sync.Mutex

	mu       sync.Mutex
	sessions map[string]*Session
	creating map[string]bool
	closed   bool
}

// Open opens (creating if needed) the session directory cfg.Dir and
// reattaches to the sessions already in it: live shells are adopted with
// their state, a command that was running is followed to its end, and a
// command that finished while no Manager was attached gets its result from
// its files.
func Open(ctx context.Context, cfg Config) (*Manager, error) {
	if cfg.Dir == "" {
		return nil, fmt.Errorf("session: %w: Config.Dir is required", ErrInvalid)
	}
	if cfg.Launcher == nil {
		return nil, fmt.Errorf("session: %w: Config.Launcher is required", ErrInvalid)
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	// Command lines carry paths under Dir several times and must stay below
	// PIPE_BUF to be written atomically.
	if len(dir) > 512 {
		return nil, fmt.Errorf("session: %w: Config.Dir is longer than 512 bytes", ErrInvalid)
	}
	cfg.Dir = dir
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Shell == "" {
		cfg.Shell = "bash"
	}
	if cfg.OutputLimit <= 0 {
		cfg.OutputLimit = 1 << 20
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 15 * time.Second
	}
	if cfg.InterruptGrace <= 0 {
		cfg.InterruptGrace = 500 * time.Millisecond
	}
	if cfg.SnapshotDelay <= 0 {
		cfg.SnapshotDelay = 20 * time.Millisecond
	}
	if cfg.KeepOutputs <= 0 {
		cfg.KeepOutputs = 1000
	}
	if cfg.PrepareWait <= 0 {
		cfg.PrepareWait = time.Second
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "manager.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("session: %s: %w", dir, ErrLocked)
		}
		return nil, fmt.Errorf("session: lock %s: %w", dir, err)
	}
	m := &Manager{
		cfg:      cfg,
		log:      cfg.Logger.With("component", "session"),
		lock:     lock,
		sessions: map[string]*Session{},
		creating: map[string]bool{},
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("session: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() || !validID(e.Name()) {
			continue
		}
		s, err := reattach(ctx, m, filepath.Join(dir, e.Name()))
		if err != nil {
			m.log.Warn("cannot reattach session", "session_id", e.Name(), "err", err)
			continue
		}
		m.sessions[s.id] = s
	}
	return m, nil
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$`)

// validID reports whether id can name a session.
func validID(id string) bool { return idPattern.MatchString(id) }

// ValidateID returns an ErrInvalid error saying what is wrong with a
// session id, or nil.
func ValidateID(id string) error {
	if !validID(id) {
		return fmt.Errorf("%w: session id %q: want 1-64 characters of A-Z a-z 0-9 . _ -, not starting with . or -", ErrInvalid, id)
	}
	return nil
}

// Create starts a new session.
func (m *Manager) Create(ctx context.Context, req CreateRequest) (*Session, error) {
	if req.ID == "" {
		id, err := randomHex(6)
		if err != nil {
			return nil, err
		}
		req.ID = "s-" + id
	}
	if err := ValidateID(req.ID); err != nil {
		return nil, err
	}
	if err := checkEnv(req.Env); err != nil {
		return nil, fmt.Errorf("create session: %w", err)
	}
	if req.Cwd != "" && !filepath.IsAbs(req.Cwd) {
		return nil, fmt.Errorf("create session: %w: cwd %q is not an absolute path", ErrInvalid, req.Cwd)
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, fmt.Errorf("session manager: %w", ErrClosed)
	}
	if _, ok := m.sessions[req.ID]; ok || m.creating[req.ID] {
		m.mu.Unlock()
		return nil, fmt.Errorf("%w: session %s exists already: use it, or choose another id", ErrExists, req.ID)
	}
	m.creating[req.ID] = true
	m.mu.Unlock()

	s, err := launch(ctx, m, req)

	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.creating, req.ID)
	if err != nil {
		return nil, err
	}
	m.sessions[s.id] = s
	m.log.Info("session created", "session_id", s.id)
	return s, nil
}

// Get returns session id.
func (m *Manager) Get(id string) (*Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[id]
	if !ok {
		return nil, fmt.Errorf("session %s: %w", id, ErrNotFound)
	}
	return s, nil
}

// all returns the sessions (in no order).
func (m *Manager) all() []*Session {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.allLocked()
}

// allLocked is all, called with m.mu held.
func (m *Manager) allLocked() []*Session {
	ss := make([]*Session, 0, len(m.sessions))
	for _, s := range m.sessions {
		ss = append(ss, s)
	}
	return ss
}

// List describes every session, sorted by id.
func (m *Manager) List() []Info {
	ss := m.all()
	out := make([]Info, 0, len(ss))
	for _, s := range ss {
		out = append(out, s.Info())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Remove closes session id and deletes its directory (history and output).
func (m *Manager) Remove(ctx context.Context, id string) error {
	s, err := m.Get(id)
	if err != nil {
		return err
	}
	if err := s.Close(ctx); err != nil && !errors.Is(err, ErrClosed) {
		return err
	}
	m.mu.Lock()
	delete(m.sessions, id)
	m.mu.Unlock()
	if err := os.RemoveAll(s.dir); err != nil {
		return fmt.Errorf("remove session %s: %w", id, err)
	}
	return nil
}

// CloseAll closes every session (ending their processes).
func (m *Manager) CloseAll(ctx context.Context) {
	ss := m.all()
	var wg sync.WaitGroup
	for _, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = s.Close(ctx)
		}()
	}
	wg.Wait()
}

// Close lets go of the sessions without ending them: their shells and
// commands keep running, and a later Open of the same directory reattaches.
// Waiters on running commands get ErrClosed.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	ss := m.allLocked()
	m.mu.Unlock()
	for _, s := range ss {
		s.detach()
	}
	m.watches.close()
	return m.lock.Close() // releases the flock
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// SetExtraEnv adds env ("K=V" entries, after Config.Env) to the
// environment of every shell started from now on: new sessions, shells
// replaced or revived, terminals. Shells already running keep theirs.
func (m *Manager) SetExtraEnv(env []string) {
	e := append([]string(nil), env...)
	m.extraEnv.Store(&e)
}

// baseEnv is the environment a shell starts with, before its session's
// own.
func (m *Manager) baseEnv() []string {
	env := append([]string{}, m.cfg.Env...)
	if e := m.extraEnv.Load(); e != nil {
		env = append(env, *e...)
	}
	return env
}
