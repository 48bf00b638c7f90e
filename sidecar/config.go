// Package sidecar serves patina workspaces over an HTTP API. It wires the
// workspace domain (package workspace: workspaces, their agents, sessions,
// files and git) to Docker (package container) and to HTTP: its handlers
// decode a request, call the domain and encode the answer, and one function
// maps errors to statuses. The API's types and Go client live in
// sidecar/client.
package sidecar

import (
	"log/slog"
	"time"

	"github.com/patina-dev/patina/sidecar/image"
)

// Config configures a Service. Zero values take the defaults noted.
type Config struct {
	// Addr is where the HTTP API listens (default 127.0.0.1:7070; port 0
	// picks a free port, see Service.Addr).
	Addr string
	// StateDir holds the token, the workspaces' sessions and scratch
	// directories, and the git worktrees. Required.
	StateDir string
	// Token authenticates /v1 calls. Empty: read StateDir/token, or generate
	// one there (mode 0600) on first start.
	Token string
	// Logger receives structured logs (default: discard).
	Logger *slog.Logger
	// Version is reported by /healthz.
	Version string
	// DefaultImage is the workspace image when a request names none
	// (default image.DefaultTag, patina/base:bookworm).
	DefaultImage string
	// DefaultMemoryMB, DefaultCPUs and DefaultPids limit a workspace's
	// container when the request does not (defaults 4096 MB, 2 CPUs, 4096
	// processes).
	DefaultMemoryMB int64
	DefaultCPUs     float64
	DefaultPids     int64
	// MaxBodyBytes caps JSON request bodies (default 1 MiB): larger ones get
	// 413. MaxFileBytes caps file uploads (default 256 MiB).
	MaxBodyBytes int64
	MaxFileBytes int64
	// OutputLimit caps each stream in an exec result: the first and the last
	// OutputLimit bytes (default 1 MiB); the rest is read by offset.
	OutputLimit int
	// MemoryBudgetBytes is the sidecar's one memory budget (default
	// budget.DefaultSize, 32 MiB): the output of exec answers being sent
	// and the windows of agent streams (port-forward tunnels, terminals,
	// file reads) draw on it; when it is spent, answers wait (within their
	// callers' deadlines) and windows stay small. A budget smaller than an
	// answer's output (4 × OutputLimit) lets one such answer at a time.
	MemoryBudgetBytes int64
	// DiffLimit caps the diff text in GET .../diff (default 8 MiB).
	DiffLimit int
	// InterruptGrace is how long a stopped command gets between SIGINT and
	// SIGKILL (default 500 ms).
	InterruptGrace time.Duration
	// StopTimeout is how long a stopping container gets before SIGKILL
	// (default 5 s).
	StopTimeout time.Duration
	// GitAuthorName and GitAuthorEmail sign patina's commits (default
	// patina <patina@localhost>).
	GitAuthorName  string
	GitAuthorEmail string
	// Docker is the Docker API (default: a client from the environment,
	// DOCKER_HOST etc., with API version negotiation).
	Docker DockerAPI
	// IdleStop stops workspaces idle for this long (0: never), unless a
	// workspace's own idle_stop says otherwise; IdleCheck is how often they
	// are looked at (default 10 s).
	IdleStop  time.Duration
	IdleCheck time.Duration
	// WarmPool keeps this many default workspaces started for creates to
	// take (workspace.Config.WarmPool; 0: none), WarmTemplates this many
	// of each template named.
	WarmPool      int
	WarmTemplates map[string]int
	// SnapshotMaxBytes bounds what a snapshot copies of a workspace
	// (workspace.Config.MaxSnapshot; 0: 10 GiB).
	SnapshotMaxBytes int64
	// AgentTransport is how the sidecar reaches workspaces' agents: auto
	// (default), netns or exec (see container.Config).
	AgentTransport string
	// Runtime is the OCI runtime workspaces' containers run on: "" or
	// "runc" (the engine's default), or "runsc" (gVisor, a user-space
	// kernel; registered with the engine). Under runsc the agent is
	// reached by the exec transport. Only the docker engine takes one.
	Runtime string
	// AgentBinary is the patina binary shipped into workspaces (default:
	// this executable; it must be static).
	AgentBinary string
	// Engine is "docker" (default: a container per workspace on the engine
	// of Docker) or "swarm" (a service per workspace on the swarm that the
	// engine of Docker, on this host, manages).
	Engine string
	// NodeBinary is where each swarm node has the patina binary (default
	// /usr/local/lib/patina/patina); SwarmUnencrypted leaves workspaces'
	// overlay networks unencrypted.
	NodeBinary       string
	SwarmUnencrypted bool
	// NodeSocket is where each swarm node's Docker socket is (default
	// /var/run/docker.sock): a deleted workspace's volumes are removed
	// there.
	NodeSocket string
	// DefaultDiskMB is the disk of a workspace whose request names none
	// (default disk.DefaultMB); DiskPoolMB is the size of the pool of disks
	// (DiskDir) when it is made (default: 80% of the free space).
	// Disks need root, a local engine whose storage driver is overlay2 or
	// fuse-overlayfs, and xfsprogs; without them workspaces have no disk
	// limit, and a request naming one is refused.
	DefaultDiskMB int64
	DiskPoolMB    int64
	// DiskDir is where the host's pool of disks is (default
	// disk.DefaultDir, /var/lib/patina/disks): one for every sidecar of the
	// host, outside their state directories.
	DiskDir string
	// DNS is the DNS server (host:port) that workspaces' queries and the
	// egress proxy's own lookups go to (default: the first nameserver of
	// /etc/resolv.conf).
	DNS string
}

// withDefaults fills in what the HTTP layer itself uses; the workspace
// domain fills in its own defaults (limits, timeouts, author).
func (c Config) withDefaults() Config {
	if c.Addr == "" {
		c.Addr = "127.0.0.1:7070"
	}
	if c.DefaultImage == "" {
		c.DefaultImage = image.DefaultTag
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 1 << 20
	}
	return c
}
