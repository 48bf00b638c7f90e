package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/client"

	"github.com/patina-dev/patina/sidecar/container"
	"github.com/patina-dev/patina/sidecar/image"
	"github.com/patina-dev/patina/worktree"
)

// DockerAPI is the part of the Docker client the service uses.
type DockerAPI interface {
	container.API
	image.ImageAPI
	Ping(ctx context.Context) (types.Ping, error)
}

var _ DockerAPI = (*client.Client)(nil)

// Service is the sidecar: workspaces and their sessions behind the HTTP
// API. New, then Start; Shutdown stops the HTTP server and leaves
// containers and sessions running for the next start to adopt.
type Service struct {
	cfg    Config
	log    *slog.Logger
	docker DockerAPI
	images *image.Manager
	token  string
	wtCfg  worktree.Config

	base   *slog.Logger // the injected logger, for other components
	lock   *os.File     // flock on StateDir/serve.lock while serving
	ln     net.Listener
	srv    *http.Server
	done   chan struct{}
	cancel context.CancelFunc // background work (Docker events)

	mu         sync.RWMutex
	workspaces map[string]*workspace // by id
	names      map[string]string     // name -> id
	reserved   map[string]bool       // names being created
	repos      map[string]*worktree.Repo
}

// New validates cfg and prepares a Service; nothing listens yet.
func New(cfg Config) (*Service, error) {
	cfg = cfg.withDefaults()
	if cfg.StateDir == "" {
		return nil, fmt.Errorf("sidecar: %w: a state directory is required", errInvalid)
	}
	abs, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	cfg.StateDir = abs
	if err := os.MkdirAll(filepath.Join(abs, "workspaces"), 0o755); err != nil {
		return nil, fmt.Errorf("sidecar: state directory: %w", err)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Docker == nil {
		c, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
		if err != nil {
			return nil, fmt.Errorf("sidecar: docker client: %w", err)
		}
		cfg.Docker = c
	}
	tok, err := loadToken(abs, cfg.Token)
	if err != nil {
		return nil, fmt.Errorf("sidecar: %w", err)
	}
	s := &Service{
		cfg:        cfg,
		log:        logger.With("component", "sidecar"),
		base:       logger,
		docker:     cfg.Docker,
		token:      tok,
		done:       make(chan struct{}),
		workspaces: map[string]*workspace{},
		names:      map[string]string{},
		reserved:   map[string]bool{},
		repos:      map[string]*worktree.Repo{},
	}
	s.images = image.New(image.Config{}, cfg.Docker, logger)
	s.wtCfg = worktree.Config{
		StateDir: abs,
		Author:   worktree.Signature{Name: cfg.GitAuthorName, Email: cfg.GitAuthorEmail},
		Logger:   logger,
	}
	return s, nil
}

// Token returns the bearer token /v1 calls need.
func (s *Service) Token() string { return s.token }

// Addr returns the address the API listens on (after Start).
func (s *Service) Addr() string {
	if s.ln == nil {
		return s.cfg.Addr
	}
	return s.ln.Addr().String()
}

// Done is closed when the HTTP server has stopped.
func (s *Service) Done() <-chan struct{} { return s.done }

// Start adopts the workspaces in the state directory (reattaching to their
// containers and live sessions), starts listening and serves in the
// background.
func (s *Service) Start(ctx context.Context) error {
	if _, err := s.docker.Ping(ctx); err != nil {
		return fmt.Errorf("sidecar: cannot reach the Docker engine (is dockerd running? DOCKER_HOST?): %w", err)
	}
	// One sidecar per state directory: a second one must not adopt (and
	// reattach to) the first one's workspaces.
	lock, err := os.OpenFile(filepath.Join(s.cfg.StateDir, "serve.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("sidecar: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return fmt.Errorf("sidecar: another patina serve is running with state directory %s (%v)", s.cfg.StateDir, err)
	}
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		lock.Close()
		return fmt.Errorf("sidecar: listen %s: %w", s.cfg.Addr, err)
	}
	s.lock, s.ln = lock, ln
	// Connections wait in the listen backlog until adoption is done.
	s.adopt(ctx)
	bg, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go container.Watch(bg, s.docker, s.cfg.StateDir, s.onContainerEvent)
	s.srv = &http.Server{
		Handler:           s.routes(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http server", "err", err)
		}
	}()
	if err := s.writeDiscovery(); err != nil {
		s.log.Warn("write sidecar.json", "err", err)
	}
	s.log.Info("listening", "addr", s.Addr(), "state_dir", s.cfg.StateDir, "workspaces", len(s.workspaces))
	return nil
}

// discovery is StateDir/sidecar.json, for the CLI to find a running sidecar.
type discovery struct {
	Addr    string `json:"addr"`
	PID     int    `json:"pid"`
	Version string `json:"version"`
}

func (s *Service) writeDiscovery() error {
	b, _ := json.Marshal(discovery{Addr: s.Addr(), PID: os.Getpid(), Version: s.cfg.Version})
	return writeFileAtomic(filepath.Join(s.cfg.StateDir, "sidecar.json"), append(b, '\n'))
}

// writeFileAtomic writes a file through a temporary one and a rename:
// readers never see half of it, and a crash leaves the old one.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Shutdown stops accepting requests, waits for those in flight (until ctx
// ends), then lets go of the sessions without ending them: containers,
// shells and running commands carry on, and the next Start adopts them.
func (s *Service) Shutdown(ctx context.Context) error {
	var err error
	if s.srv != nil {
		err = s.srv.Shutdown(ctx)
	}
	if s.cancel != nil {
		s.cancel()
	}
	_ = os.Remove(filepath.Join(s.cfg.StateDir, "sidecar.json"))
	s.mu.RLock()
	wss := make([]*workspace, 0, len(s.workspaces))
	for _, w := range s.workspaces {
		wss = append(wss, w)
	}
	s.mu.RUnlock()
	for _, w := range wss {
		w.release()
	}
	if s.lock != nil {
		s.lock.Close() // releases the flock
	}
	return err
}

// lookup finds a workspace by id or name.
func (s *Service) lookup(idOrName string) (*workspace, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if w, ok := s.workspaces[idOrName]; ok {
		return w, nil
	}
	if id, ok := s.names[idOrName]; ok {
		return s.workspaces[id], nil
	}
	return nil, fmt.Errorf("%w: no workspace %q", errNotFound, idOrName)
}

// list returns the workspaces, oldest first.
func (s *Service) list() []*workspace {
	s.mu.RLock()
	out := make([]*workspace, 0, len(s.workspaces))
	for _, w := range s.workspaces {
		out = append(out, w)
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].snapshot(), out[j].snapshot()
		if !a.CreatedAt.Equal(b.CreatedAt) {
			return a.CreatedAt.Before(b.CreatedAt)
		}
		return a.ID < b.ID
	})
	return out
}

// repo opens (once) the user's repository at path.
func (s *Service) repo(ctx context.Context, path string) (*worktree.Repo, error) {
	s.mu.Lock()
	r, ok := s.repos[path]
	s.mu.Unlock()
	if ok {
		return r, nil
	}
	r, err := worktree.Open(ctx, s.wtCfg, path)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, ok := s.repos[r.Root()]; ok {
		s.repos[path] = prev
		return prev, nil
	}
	s.repos[path] = r
	s.repos[r.Root()] = r
	return r, nil
}

// onContainerEvent marks a workspace stopped when its container dies or
// is removed without the sidecar asking.
func (s *Service) onContainerEvent(id, action string) {
	w, err := s.lookup(id)
	if err != nil {
		return
	}
	w.containerEvent(action)
}
