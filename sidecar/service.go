package sidecar

import (
	"cmp"
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
	"syscall"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/client"

	"github.com/patina-dev/patina/sidecar/budget"
	"github.com/patina-dev/patina/sidecar/console"
	"github.com/patina-dev/patina/sidecar/container"
	"github.com/patina-dev/patina/sidecar/disk"
	"github.com/patina-dev/patina/sidecar/image"
	"github.com/patina-dev/patina/sidecar/metrics"
	"github.com/patina-dev/patina/sidecar/secrets"
	"github.com/patina-dev/patina/sidecar/template/builder"
	"github.com/patina-dev/patina/sidecar/workspace"
	"github.com/patina-dev/patina/worktree"
)

// DockerAPI is the part of the Docker client the service uses.
type DockerAPI interface {
	container.API
	image.ImageAPI
	Ping(ctx context.Context) (types.Ping, error)
}

var _ DockerAPI = (*client.Client)(nil)

// Service is the sidecar: the workspace domain behind the HTTP API. New,
// then Start; Shutdown stops the HTTP server and leaves containers, agents
// and sessions running for the next start to adopt.
type Service struct {
	cfg    Config
	log    *slog.Logger
	docker DockerAPI
	eng    engine
	net    *boundary
	vault  *secrets.Vault
	mgr    *workspace.Manager
	tpl    *builder.Manager // nil: no templates
	token  string
	// console is the web console (package console): its page, sign-in and
	// browser keys; metrics are the operators' figures (GET /metrics).
	console    *console.Console
	metrics    *metrics.Metrics
	eventSlots chan struct{} // bounds GET /v1/events streams

	lock    *os.File // flock on StateDir/serve.lock while serving
	ln      net.Listener
	srv     *http.Server
	done    chan struct{}
	adopted <-chan struct{}
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
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("sidecar: state directory: %w", err)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	// No log record holds a secret's value, or a secret_env value.
	redactor := secrets.NewRedactor()
	logger = slog.New(redactor.Handler(logger.Handler()))
	vault, err := secrets.Open(secrets.Config{StateDir: abs, Redactor: redactor, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("sidecar: %w", err)
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
	eng, err := newEngine(cfg, abs, logger)
	if err != nil {
		return nil, fmt.Errorf("sidecar: %w", err)
	}
	nb := newBoundary(cfg, eng, abs, logger)
	nb.hook = vault
	images := imageEnsurer{m: image.New(image.Config{}, cfg.Docker, logger), log: logger}
	disks, disksWhy := openDisks(cfg, eng, abs, logger)
	// Templates are built through the engine's own build API: a Docker
	// client that has one (every real one; not a test's fake).
	var templates *builder.Manager
	var wsTemplates workspace.Templates
	if api, ok := cfg.Docker.(builder.API); ok {
		templates = builder.New(builder.Config{StateDir: abs, Logger: logger, Runtime: cfg.Runtime, CPUs: cfg.DefaultCPUs}, api)
		wsTemplates = templates
		sctx, cancel := context.WithTimeout(context.Background(), sweepTimeout)
		templates.Sweep(sctx)
		cancel()
	}
	mgr, err := workspace.New(workspace.Config{
		Budget:          budget.New(cfg.MemoryBudgetBytes),
		StateDir:        abs,
		DefaultImage:    cfg.DefaultImage,
		DefaultMemoryMB: cfg.DefaultMemoryMB,
		DefaultCPUs:     cfg.DefaultCPUs,
		DefaultPids:     cfg.DefaultPids,
		OutputLimit:     cfg.OutputLimit,
		DiffLimit:       cfg.DiffLimit,
		MaxFileBytes:    cfg.MaxFileBytes,
		InterruptGrace:  cfg.InterruptGrace,
		StopTimeout:     cfg.StopTimeout,
		IdleStop:        cfg.IdleStop,
		IdleCheck:       cfg.IdleCheck,
		WarmPool:        cfg.WarmPool,
		WarmTemplates:   cfg.WarmTemplates,
		MaxSnapshot:     cfg.SnapshotMaxBytes,
		Network:         nb,
		Secrets:         vault,
		Redactor:        redactor,
		GitAuthor:       worktree.Signature{Name: cfg.GitAuthorName, Email: cfg.GitAuthorEmail},
		Disks:           disks,
		DisksWhy:        disksWhy,
		DefaultDiskMB:   cfg.DefaultDiskMB,
		Templates:       wsTemplates,
		Logger:          logger,
	}, eng, images)
	if err != nil {
		return nil, fmt.Errorf("sidecar: %w", err)
	}
	nb.refused = mgr.NetworkRefused
	return &Service{
		cfg:    cfg,
		log:    logger.With("component", "sidecar"),
		docker: cfg.Docker,
		eng:    eng,
		net:    nb,
		vault:  vault,
		mgr:    mgr,
		tpl:    templates,
		token:  tok,
		done:   make(chan struct{}),

		console:    console.New(console.Config{Token: tok, Logger: logger}),
		metrics:    metrics.New(mgr, metricsExtras(cfg, mgr, templates)),
		eventSlots: make(chan struct{}, maxEventStreams),
	}, nil
}

// imageEnsurer adapts image.Manager to workspace.Images.
type imageEnsurer struct {
	m   *image.Manager
	log *slog.Logger
}

func (e imageEnsurer) Ensure(ctx context.Context, ref string) error {
	return e.m.Ensure(ctx, image.EnsureRequest{Ref: ref, Logger: e.log})
}

// Token returns the bearer token /v1 calls need.
func (s *Service) Token() string { return s.token }

// Manager returns the workspace domain (for in-process callers and tests).
func (s *Service) Manager() *workspace.Manager { return s.mgr }

// Addr returns the address the API listens on (after Start).
func (s *Service) Addr() string {
	if s.ln == nil {
		return s.cfg.Addr
	}
	return s.ln.Addr().String()
}

// Done is closed when the HTTP server has stopped.
func (s *Service) Done() <-chan struct{} { return s.done }

// Adopted is closed once the workspaces of a previous run are adopted
// (after Start).
func (s *Service) Adopted() <-chan struct{} { return s.adopted }

// Start starts listening and serving, then adopts the workspaces of a
// previous run in the background: the API answers at once, and a
// workspace reports "adopting" until it is reconnected.
func (s *Service) Start(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, engineCheckTimeout)
	_, err := s.docker.Ping(pctx)
	// The client negotiates the API version lazily, and not safely under
	// concurrent first calls (adoption and the events watcher): now, once.
	if n, ok := s.docker.(interface{ NegotiateAPIVersion(context.Context) }); ok && err == nil {
		n.NegotiateAPIVersion(pctx)
	}
	cancel()
	if err != nil {
		return fmt.Errorf("sidecar: cannot reach the Docker engine (is dockerd running? DOCKER_HOST?): %w", err)
	}
	// One sidecar per state directory: a second one must not adopt (and
	// reattach to) the first one's workspaces, nor clean up after them
	// (the engine's check sweeps what creates cut short left).
	lock, err := os.OpenFile(filepath.Join(s.cfg.StateDir, "serve.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("sidecar: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return fmt.Errorf("sidecar: another patina serve is running with state directory %s (%v)", s.cfg.StateDir, err)
	}
	if c, ok := s.eng.(interface{ Check(context.Context) error }); ok {
		cctx, cancel := context.WithTimeout(ctx, engineCheckTimeout)
		err := c.Check(cctx)
		cancel()
		if err != nil {
			lock.Close()
			return fmt.Errorf("sidecar: %w", err)
		}
	}
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		lock.Close()
		return fmt.Errorf("sidecar: listen %s: %w", s.cfg.Addr, err)
	}
	s.lock, s.ln = lock, ln
	s.srv = &http.Server{
		Handler:           s.routes(),
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleConnTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http server", "err", err)
		}
	}()
	// The boundary before adoption: adopted workspaces join it.
	s.net.start(ctx)
	s.adopted = s.mgr.Adopt()
	if err := s.writeDiscovery(); err != nil {
		s.log.Warn("write sidecar.json", "err", err)
	}
	s.log.Info("listening", "addr", s.Addr(), "state_dir", s.cfg.StateDir, "agent_transport", s.eng.Transport(), "local_engine", s.eng.Local(), "runtime", cmp.Or(s.cfg.Runtime, "runc"))
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
	tmp := filepath.Join(s.cfg.StateDir, "sidecar.json.tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(s.cfg.StateDir, "sidecar.json"))
}

// Shutdown stops accepting requests, waits for those in flight (until ctx
// ends), then lets go of the workspaces without stopping them: containers,
// agents, shells and running commands carry on, and the next Start adopts
// them.
func (s *Service) Shutdown(ctx context.Context) error {
	var err error
	if s.srv != nil {
		err = s.srv.Shutdown(ctx)
	}
	_ = os.Remove(filepath.Join(s.cfg.StateDir, "sidecar.json"))
	empty := len(s.mgr.List()) == 0
	s.mgr.Close()
	s.net.close(ctx, empty)
	if s.lock != nil {
		s.lock.Close() // releases the flock
	}
	return err
}

// engine is where workspaces run: a Docker engine or a Swarm cluster.
type engine interface {
	workspace.Engine
	Transport() string
}

// diskOpenTimeout bounds making and mounting the disk pool at start
// (milliseconds; seconds on a loaded host).
const diskOpenTimeout = time.Minute

// The service's other waits, each with its reason.
const (
	// engineCheckTimeout bounds the engine's first answer at start (a
	// ping, then its own check: networks, the agent's binary): a serve
	// that cannot reach its engine says so instead of hanging.
	engineCheckTimeout = 30 * time.Second
	// readHeaderTimeout bounds a client's request headers (a slow or
	// silent connection does not hold a goroutine); idleConnTimeout
	// closes a keep-alive connection nobody uses.
	readHeaderTimeout = 10 * time.Second
	idleConnTimeout   = 2 * time.Minute
	// metricsQueryTimeout bounds asking the engine for a figure of a
	// metrics scrape (the templates' count).
	metricsQueryTimeout = 5 * time.Second
	// sweepTimeout bounds removing, at start, what an interrupted snapshot
	// left (a few list and remove calls).
	sweepTimeout = 30 * time.Second
)

// openDisks opens the pool of workspaces' disks where the engine can keep
// a workspace's writes on one; elsewhere it says why there are none.
func openDisks(cfg Config, eng engine, stateDir string, logger *slog.Logger) (workspace.Disks, error) {
	ctx, cancel := context.WithTimeout(context.Background(), diskOpenTimeout)
	defer cancel()
	err := eng.DiskSupport(ctx)
	var pool *disk.Pool
	if err == nil {
		pool, err = disk.Open(ctx, disk.Config{Dir: cfg.DiskDir, PoolMB: cfg.DiskPoolMB, Owner: stateDir, Logger: logger})
	}
	if err != nil {
		logger.Warn("workspaces have no disk limit: one can fill the host's disk", "why", err)
		return nil, err
	}
	logger.Info("workspaces' disks", "pool", cmp.Or(cfg.DiskDir, disk.DefaultDir), "pool_mb", pool.SizeMB())
	return pool, nil
}

// newEngine makes cfg's engine.
func newEngine(cfg Config, stateDir string, logger *slog.Logger) (engine, error) {
	switch cfg.Engine {
	case "", "docker":
		return container.New(cfg.Docker, container.Config{
			StateDir:  stateDir,
			Binary:    cfg.AgentBinary,
			Version:   cfg.Version,
			Transport: cfg.AgentTransport,
			Runtime:   cfg.Runtime,
			Logger:    logger,
		})
	case "swarm":
		if cfg.Runtime != "" && cfg.Runtime != container.RuntimeRunc {
			return nil, fmt.Errorf("%w: runtime %s needs --engine docker (a Swarm service cannot choose its runtime)", errInvalid, cfg.Runtime)
		}
		api, ok := cfg.Docker.(container.SwarmAPI)
		if !ok {
			return nil, fmt.Errorf("%w: --engine swarm needs a full Docker client", errInvalid)
		}
		return container.NewSwarm(api, container.SwarmConfig{
			StateDir:    stateDir,
			Binary:      cfg.AgentBinary,
			NodeBinary:  cfg.NodeBinary,
			NodeSocket:  cfg.NodeSocket,
			Unencrypted: cfg.SwarmUnencrypted,
			Logger:      logger,
		})
	}
	return nil, fmt.Errorf("%w: engine must be docker or swarm, not %q", errInvalid, cfg.Engine)
}

// metricsExtras are the warm pool's and the templates' figures, where the
// sidecar has them.
func metricsExtras(cfg Config, mgr *workspace.Manager, templates *builder.Manager) metrics.Extras {
	var x metrics.Extras
	if cfg.WarmPool > 0 || len(cfg.WarmTemplates) > 0 {
		x.Pool = func() (int, int, int, int64) {
			p := mgr.Pool()
			return p.Size, p.Ready, p.Filling, p.Taken
		}
	}
	if templates != nil {
		x.Templates = func() int {
			ctx, cancel := context.WithTimeout(context.Background(), metricsQueryTimeout)
			defer cancel()
			list, err := templates.List(ctx)
			if err != nil {
				return 0
			}
			return len(list)
		}
	}
	return x
}
