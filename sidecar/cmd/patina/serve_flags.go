//go:build !windows

package main

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/patina-dev/patina/sidecar/budget"
	"github.com/patina-dev/patina/sidecar/disk"
	"github.com/patina-dev/patina/sidecar/image"
	"github.com/patina-dev/patina/sidecar/template"
	"github.com/patina-dev/patina/sidecar/workspace"
	"github.com/spf13/cobra"
)

// serveOptions are serve's flags.
type serveOptions struct {
	addr, stateDir, token, image string
	transport, runtime           string
	engine, nodeBinary           string
	nodeSocket                   string
	agentBinary                  string
	unencrypted                  bool
	dns                          string
	logLevel, logFormat          string
	shutdownTimeout              time.Duration
	idleStop                     time.Duration
	warm                         int
	warmTemplates                []string
	snapshotMaxMB                int64
	metricsAddr                  string
	diskMB, diskPoolMB           int64
	diskDir                      string
	memoryBudgetMB               int64
	group                        string
}

// serveSettings are serve's flags resolved against the environment.
type serveSettings struct {
	Addr, StateDir, Token, Image string
	Transport, Runtime           string
	Engine, NodeBinary           string
	NodeSocket                   string
	AgentBinary                  string
	Unencrypted                  bool
	DNS                          string
	Logger                       *slog.Logger
	ShutdownTimeout              time.Duration
	IdleStop                     time.Duration
	WarmPool                     int
	WarmTemplates                map[string]int
	SnapshotMaxMB                int64
	DiskMB, DiskPoolMB           int64
	DiskDir                      string
	MemoryBudgetMB               int64
	// SystemDir, when set, is where this (root's) sidecar publishes its
	// address, and its token for Group (see sysdir.go).
	SystemDir, Group string
	// MetricsAddr, when set, serves GET /metrics there without a token.
	MetricsAddr string
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

Run by root with its default state directory (sudo patina serve), it also
publishes its address in /run/patina/sidecar.json and its token in
/run/patina/token, readable by the group --group (default patina, as Docker's
socket is the docker group's): the users of that group then run patina
commands as themselves, with no flags. Create the group and join it once:
sudo groupadd patina; sudo usermod -aG patina $USER (then log in again). Its
members can run commands as root in every workspace. PATINA_SYSTEM_DIR names
another directory (and publishes there whatever the state directory).

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
			return a.serve(cmd.Context(), s)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.addr, "addr", "", "where to listen, host:port; port 0 picks a free port (env "+envAddr+"; default "+defaultAddr+")")
	f.StringVar(&o.stateDir, "state-dir", "", "the state directory: token, sessions, worktrees (env "+envStateDir+"; default $XDG_STATE_HOME/patina, else ~/.local/state/patina)")
	f.StringVar(&o.token, "token", "", "the API token (env "+envToken+"; default: <state-dir>/"+tokenFile+", generated on first start)")
	f.StringVar(&o.image, "image", image.DefaultTag, "the image of workspaces whose request names none")
	f.StringVar(&o.transport, "agent-transport", "auto", "how to reach the agents in workspaces: auto (through each container's network namespace when the engine is on this host and its pids are visible, else exec), netns, or exec (a docker exec relay: any engine)")
	f.StringVar(&o.runtime, "runtime", "runc", "the OCI runtime workspaces run on: runc (Docker's default: the host's kernel, behind namespaces, cgroups, dropped capabilities and seccomp) or runsc (gVisor: a user-space kernel between the workspace and the host's; slower execs and starts, more memory; it must be registered with the Docker engine, and the agent is then reached by --agent-transport exec; see README)")
	f.StringVar(&o.engine, "engine", "docker", "where workspaces run: docker (containers on the Docker engine of DOCKER_HOST) or swarm (a service per workspace on the Docker Swarm cluster this host manages; see docs/scale-out.md)")
	f.StringVar(&o.agentBinary, "agent-binary", "", "the Linux binary the workspaces' agent runs, shipped into a volume and checked by hash (default on Linux: patina-agent beside this executable when it speaks this sidecar's protocol, as go install ./sidecar/cmd/... leaves it, else this executable (always this executable with --engine swarm); on macOS, patina-linux-<arch> beside it: CGO_ENABLED=0 GOOS=linux GOARCH=<arch> go build -o patina-linux-<arch> ./sidecar/cmd/patina); never downloaded")
	f.StringVar(&o.nodeBinary, "node-binary", "/usr/local/lib/patina/patina", "--engine swarm: where every node has this same patina binary (static), mounted read-only into its workspaces")
	f.StringVar(&o.nodeSocket, "swarm-node-socket", "/var/run/docker.sock", "--engine swarm: where every node's Docker socket is: a deleted workspace's volumes are removed on its node by a one-shot task of patina's agent image that mounts it")
	f.BoolVar(&o.unencrypted, "swarm-unencrypted", false, "--engine swarm: do not encrypt the workspaces' overlay networks (IPsec between nodes; needs the kernel's xfrm and ESP between nodes: without this flag serve checks this kernel's at start and refuses to run without them)")
	f.StringVar(&o.dns, "dns", "", "the DNS server (host:port) that workspaces' DNS queries and the egress proxy's lookups go to, filtered by each workspace's network policy (default: the first nameserver of /etc/resolv.conf)")
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&o.logFormat, "log-format", "text", "text or json")
	f.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long to wait for requests in flight when stopping")
	f.Int64Var(&o.diskMB, "disk", disk.DefaultMB, "the disk in MB of a workspace whose request names none: everything it writes (its files, its sessions' state, what it installs in its container) must fit, or writes fail with ENOSPC inside. Disks live in a pool (--disk-dir), an XFS image made on first start; they need root, a local engine with the overlay2 or fuse-overlayfs storage driver, and xfsprogs. Elsewhere workspaces have no disk limit (said in the log)")
	f.StringVar(&o.diskDir, "disk-dir", disk.DefaultDir, "where the host's pool of workspace disks is kept (pool.img, and a mount point per disk); every sidecar of the host can share it")
	f.Int64Var(&o.diskPoolMB, "disk-pool", 0, "the size in MB of the disk pool when it is made (a sparse file: it takes host space only as workspaces write; default 80% of the free space under the state directory). It bounds what all workspaces together can write, and so protects the host")
	f.Int64Var(&o.memoryBudgetMB, "memory-budget", budget.DefaultSize>>20, "the sidecar's memory budget in MB, shared by all workspaces: the output of exec answers in flight and the windows of port-forward tunnels and other agent streams draw on it. When it is spent, answers wait (within their callers' deadlines) and tunnels carry data in smaller windows: the sidecar's memory stays bounded whatever the number of workspaces, commands and connections")
	f.StringVar(&o.group, "group", defaultGroup, "run by root: the group (name or gid) that may read the token published in "+defaultSystemDir+" (env "+envSystemDir+" for another directory), so that its members use this sidecar as themselves")
	f.IntVar(&o.warm, "warm", 0, "keep `N` workspaces of the default image, limits and disk started (container, agent and first session up) for creates to take: such a create answers at once, is given its repository (its branch, files and history), env, secrets, idle stop and network policy, and the pool refills in the background; a create of another image or other limits makes its own (0: no pool)")
	f.StringArrayVar(&o.warmTemplates, "warm-template", nil, "for each `NAME=N`, keep N workspaces of template NAME started as --warm does for the default image, for creates with --template NAME, or of a repository whose devcontainer.json or Dockerfile makes the same image (patina template build --repo R --name NAME), that match them (repeatable; --warm and these keep at most 256 in all; a template removed with patina template rm takes its pooled workspaces with it)")
	f.Int64Var(&o.snapshotMaxMB, "snapshot-max-mb", 10<<10, "the most a snapshot (patina ws snapshot) copies of a workspace (its container's changes, a sparse file at its length, its files and sessions' state) into the engine's storage, in MB: a larger workspace is refused (413)")
	f.StringVar(&o.metricsAddr, "metrics-addr", "", "also serve GET /metrics (Prometheus text) here, host:port, without a token (on the API's address /metrics needs the token)")
	f.DurationVar(&o.idleStop, "idle-stop", 0, "stop a workspace after this long without activity (API calls on it, running commands, port connections): paused first (its processes kept, frozen; resumed in milliseconds), stopped after as long again (its memory freed; on --engine swarm, stopped at once); 0: never. A workspace's own idle_stop wins. The next exec, session call or port connection resumes it")
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
	if o.memoryBudgetMB == 0 {
		o.memoryBudgetMB = budget.DefaultSize >> 20
	}
	if o.memoryBudgetMB < 4 || o.memoryBudgetMB > 1<<20 {
		return s, usagef("--memory-budget must be between 4 and 1048576 (MB), not %d", o.memoryBudgetMB)
	}
	s.MemoryBudgetMB = o.memoryBudgetMB
	if o.snapshotMaxMB == 0 {
		o.snapshotMaxMB = 10 << 10
	}
	if o.snapshotMaxMB < 1 {
		return s, usagef("--snapshot-max-mb must be at least 1, not %d", o.snapshotMaxMB)
	}
	s.SnapshotMaxMB = o.snapshotMaxMB
	if o.warm < 0 || o.warm > workspace.MaxWarmPool {
		return s, usagef("--warm must be between 0 and %d, not %d", workspace.MaxWarmPool, o.warm)
	}
	warmTemplates, err := parseWarmTemplates(o.warmTemplates, o.warm)
	if err != nil {
		return s, err
	}
	s.WarmTemplates = warmTemplates
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
	switch o.runtime {
	case "", "runc":
		o.runtime = ""
	case "runsc":
		if o.transport == "netns" {
			return s, usagef("--runtime runsc needs --agent-transport exec or auto (gVisor keeps its own network stack; the netns transport cannot reach an agent there)")
		}
		o.transport = "exec"
	default:
		return s, usagef("--runtime must be runc or runsc, not %q", o.runtime)
	}
	switch o.engine {
	case "":
		o.engine = "docker"
	case "docker", "swarm":
	default:
		return s, usagef("--engine must be docker or swarm, not %q", o.engine)
	}
	if o.engine == "swarm" && o.runtime != "" {
		return s, usagef("--runtime %s needs --engine docker (a Swarm service cannot choose its runtime)", o.runtime)
	}
	if o.engine == "swarm" && (o.nodeBinary == "" || !strings.HasPrefix(o.nodeBinary, "/")) {
		return s, usagef("--node-binary must be an absolute path, not %q", o.nodeBinary)
	}
	if o.engine == "swarm" && o.nodeSocket != "" && !strings.HasPrefix(o.nodeSocket, "/") {
		return s, usagef("--swarm-node-socket must be an absolute path, not %q", o.nodeSocket)
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
	// Root's sidecar with the default state directory is the machine's:
	// its users find it through the system directory.
	var systemDir string
	if os.Geteuid() == 0 {
		if a.getenv(envSystemDir) != "" {
			systemDir = a.getenv(envSystemDir)
		} else if o.stateDir == "" && a.getenv(envStateDir) == "" {
			systemDir = defaultSystemDir
		}
	}
	if o.group == "" {
		o.group = defaultGroup
	}
	if o.metricsAddr != "" {
		if _, _, err := net.SplitHostPort(o.metricsAddr); err != nil {
			return s, usagef("--metrics-addr %q: want host:port (%v)", o.metricsAddr, err)
		}
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
		Runtime:         o.runtime,
		Engine:          o.engine,
		NodeBinary:      o.nodeBinary,
		NodeSocket:      o.nodeSocket,
		AgentBinary:     o.agentBinary,
		Unencrypted:     o.unencrypted,
		DNS:             o.dns,
		Logger:          slog.New(h),
		ShutdownTimeout: o.shutdownTimeout,
		IdleStop:        o.idleStop,
		DiskMB:          s.DiskMB,
		DiskPoolMB:      s.DiskPoolMB,
		DiskDir:         s.DiskDir,
		SystemDir:       systemDir,
		Group:           o.group,
		WarmPool:        o.warm,
		WarmTemplates:   s.WarmTemplates,
		SnapshotMaxMB:   s.SnapshotMaxMB,
		MetricsAddr:     o.metricsAddr,
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

// parseWarmTemplates reads --warm-template's NAME=N values (warm: --warm's
// N, counted in the bound).
func parseWarmTemplates(vals []string, warm int) (map[string]int, error) {
	if len(vals) == 0 {
		return nil, nil
	}
	out := map[string]int{}
	total := warm
	for _, v := range vals {
		name, num, ok := strings.Cut(v, "=")
		n, err := strconv.Atoi(num)
		if !ok || err != nil || n < 1 {
			return nil, usagef("--warm-template takes NAME=N (N at least 1), not %q", v)
		}
		if err := template.ValidName(name); err != nil {
			return nil, usagef("--warm-template %s: %v", v, err)
		}
		if _, dup := out[name]; dup {
			return nil, usagef("--warm-template names template %s twice", name)
		}
		out[name] = n
		total += n
		if total > workspace.MaxWarmPool {
			return nil, usagef("--warm and --warm-template keep at most %d workspaces in all, not %d", workspace.MaxWarmPool, total)
		}
	}
	return out, nil
}
