package main

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/patina-dev/patina/sidecar/disk"
	"github.com/patina-dev/patina/sidecar/image"
	"github.com/spf13/cobra"
)

// serveOptions are serve's flags.
type serveOptions struct {
	addr, stateDir, token, image string
	transport                    string
	engine, nodeBinary           string
	unencrypted                  bool
	dns                          string
	logLevel, logFormat          string
	shutdownTimeout              time.Duration
	idleStop                     time.Duration
	diskMB, diskPoolMB           int64
	diskDir                      string
}

// serveSettings are serve's flags resolved against the environment.
type serveSettings struct {
	Addr, StateDir, Token, Image string
	Transport                    string
	Engine, NodeBinary           string
	Unencrypted                  bool
	DNS                          string
	Logger                       *slog.Logger
	ShutdownTimeout              time.Duration
	IdleStop                     time.Duration
	DiskMB, DiskPoolMB           int64
	DiskDir                      string
}

func newServeCmd(a *app) *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the sidecar: the HTTP API that keeps the workspaces",
		Long: `Run the sidecar: the HTTP API that keeps one Docker container per workspace,
with persistent bash sessions in it, until SIGINT or SIGTERM.

It listens on the loopback interface by default. Every /v1 call needs
"Authorization: Bearer <token>": the token is --token, else PATINA_TOKEN, else
the one in <state-dir>/token, generated (mode 0600) on first start. The other
patina commands find the address and the token in the state directory
(<state-dir>/sidecar.json and <state-dir>/token), so run them with the same
--state-dir.

Stopping the sidecar leaves the workspaces' containers and sessions running; the
next "patina serve" with the same state directory adopts them again. Logs go to
stderr.

The workspace image (default patina/base:bookworm) need not exist yet: creating
a workspace fails until "patina image build" has built it.`,
		Example: `  patina serve
  patina serve --addr 127.0.0.1:0 --state-dir /tmp/patina --log-level debug
  PATINA_TOKEN=secret patina serve --log-format json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := a.serveSettings(o)
			if err != nil {
				return err
			}
			keepSysmonAwake(cmd.Context())
			return a.serve(cmd.Context(), s)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.addr, "addr", "", "where to listen, host:port; port 0 picks a free port (env "+envAddr+"; default "+defaultAddr+")")
	f.StringVar(&o.stateDir, "state-dir", "", "the state directory: token, sessions, worktrees (env "+envStateDir+"; default $XDG_STATE_HOME/patina, else ~/.local/state/patina)")
	f.StringVar(&o.token, "token", "", "the API token (env "+envToken+"; default: <state-dir>/"+tokenFile+", generated on first start)")
	f.StringVar(&o.image, "image", image.DefaultTag, "the image of workspaces whose request names none")
	f.StringVar(&o.transport, "agent-transport", "auto", "how to reach the agents in workspaces: auto (through each container's network namespace when the engine is on this host and its pids are visible, else exec), netns, or exec (a docker exec relay: any engine)")
	f.StringVar(&o.engine, "engine", "docker", "where workspaces run: docker (containers on the Docker engine of DOCKER_HOST) or swarm (a service per workspace on the Docker Swarm cluster this host manages; see docs/scale-out.md)")
	f.StringVar(&o.nodeBinary, "node-binary", "/usr/local/lib/patina/patina", "--engine swarm: where every node has this same patina binary (static), mounted read-only into its workspaces")
	f.BoolVar(&o.unencrypted, "swarm-unencrypted", false, "--engine swarm: do not encrypt the workspaces' overlay networks (IPsec between nodes; needs the kernel's xfrm and ESP between nodes)")
	f.StringVar(&o.dns, "dns", "", "the DNS server (host:port) that workspaces' DNS queries and the egress proxy's lookups go to, filtered by each workspace's network policy (default: the first nameserver of /etc/resolv.conf)")
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&o.logFormat, "log-format", "text", "text or json")
	f.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long to wait for requests in flight when stopping")
	f.Int64Var(&o.diskMB, "disk", disk.DefaultMB, "the disk in MB of a workspace whose request names none: everything it writes (its files, its sessions' state, what it installs in its container) must fit, or writes fail with ENOSPC inside. Disks live in a pool (--disk-dir), an XFS image made on first start; they need root, a local engine with the overlay2 or fuse-overlayfs storage driver, and xfsprogs. Elsewhere workspaces have no disk limit (said in the log)")
	f.StringVar(&o.diskDir, "disk-dir", disk.DefaultDir, "where the host's pool of workspace disks is kept (pool.img, and a mount point per disk); every sidecar of the host can share it")
	f.Int64Var(&o.diskPoolMB, "disk-pool", 0, "the size in MB of the disk pool when it is made (a sparse file: it takes host space only as workspaces write; default 80% of the free space under the state directory). It bounds what all workspaces together can write, and so protects the host")
	f.DurationVar(&o.idleStop, "idle-stop", 0, "stop a workspace after this long without activity (API calls on it, running commands, port connections); 0: never. A workspace's own idle_stop wins. The next exec, session call or port connection starts it again")
	return cmd
}

// serveSettings validates serve's flags and fills in the environment and
// the defaults.
func (a *app) serveSettings(o serveOptions) (serveSettings, error) {
	var s serveSettings
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return s, usagef("--log-level must be debug, info, warn or error, not %q", o.logLevel)
	}
	var h slog.Handler
	hopts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(o.logFormat) {
	case "text":
		h = slog.NewTextHandler(a.stderr, hopts)
	case "json":
		h = slog.NewJSONHandler(a.stderr, hopts)
	default:
		return s, usagef("--log-format must be text or json, not %q", o.logFormat)
	}
	if o.shutdownTimeout <= 0 {
		return s, usagef("--shutdown-timeout must be positive")
	}
	if o.image == "" {
		return s, usagef("--image must not be empty")
	}
	if o.diskMB == 0 {
		o.diskMB = disk.DefaultMB
	}
	if o.diskDir == "" {
		o.diskDir = disk.DefaultDir
	}
	if o.diskMB < disk.MinMB {
		return s, usagef("--disk must be at least %d (MB), not %d", disk.MinMB, o.diskMB)
	}
	if o.diskPoolMB < 0 {
		return s, usagef("--disk-pool must not be negative")
	}
	if !strings.HasPrefix(o.diskDir, "/") {
		return s, usagef("--disk-dir must be an absolute path, not %q", o.diskDir)
	}
	s.DiskMB, s.DiskPoolMB, s.DiskDir = o.diskMB, o.diskPoolMB, o.diskDir
	if o.idleStop < 0 || (o.idleStop > 0 && o.idleStop < time.Second) || o.idleStop > 720*time.Hour {
		return s, usagef("--idle-stop must be 0 (never) or between 1s and 720h, not %s", o.idleStop)
	}
	switch o.transport {
	case "":
		o.transport = "auto"
	case "auto", "netns", "exec":
	default:
		return s, usagef("--agent-transport must be auto, netns or exec, not %q", o.transport)
	}
	switch o.engine {
	case "":
		o.engine = "docker"
	case "docker", "swarm":
	default:
		return s, usagef("--engine must be docker or swarm, not %q", o.engine)
	}
	if o.engine == "swarm" && (o.nodeBinary == "" || !strings.HasPrefix(o.nodeBinary, "/")) {
		return s, usagef("--node-binary must be an absolute path, not %q", o.nodeBinary)
	}
	if o.dns != "" {
		if _, _, err := net.SplitHostPort(o.dns); err != nil {
			return s, usagef("--dns %q: want host:port (%v)", o.dns, err)
		}
	}
	// serve's own flags shadow the global ones; read them here.
	a.stateDir = o.stateDir
	dir, err := a.resolveStateDir()
	if err != nil {
		return s, err
	}
	addr := firstNonEmpty(o.addr, a.getenv(envAddr), defaultAddr)
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return s, usagef("--addr %q: want host:port (%v)", addr, err)
	}
	return serveSettings{
		Addr:            addr,
		StateDir:        dir,
		Token:           firstNonEmpty(o.token, a.getenv(envToken)),
		Image:           o.image,
		Transport:       o.transport,
		Engine:          o.engine,
		NodeBinary:      o.nodeBinary,
		Unencrypted:     o.unencrypted,
		DNS:             o.dns,
		Logger:          slog.New(h),
		ShutdownTimeout: o.shutdownTimeout,
		IdleStop:        o.idleStop,
	}, nil
}

// loopback reports whether addr's host is a loopback address or localhost.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// announce prints serve's one line on stderr.
func announce(w io.Writer, addr, stateDir string) {
	fmt.Fprintf(w, "patina %s listening on http://%s (state %s)\n", version, addr, stateDir)
}
