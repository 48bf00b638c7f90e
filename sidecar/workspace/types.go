package workspace

import (
	"context"
	"log/slog"
	"net"
	"time"

	"github.com/patina-dev/patina/sidecar/agent"
	"github.com/patina-dev/patina/sidecar/disk"
	"github.com/patina-dev/patina/sidecar/engine"
	"github.com/patina-dev/patina/sidecar/secrets"
	"github.com/patina-dev/patina/worktree"
)

// Engine runs workspaces' containers (sidecar/container implements it on Docker and Swarm).
type Engine interface {
	// Local reports whether host directories can be mounted (the engine
	// runs on the sidecar's host).
	Local() bool
	Create(ctx context.Context, spec engine.Spec) (string, error)
	Start(ctx context.Context, id string) error
	Stop(ctx context.Context, id string, timeout time.Duration) error
	Remove(ctx context.Context, id string) error
	RemoveVolumes(ctx context.Context, workspaceID string) error
	Inspect(ctx context.Context, id string) (engine.State, error)
	List(ctx context.Context) ([]engine.Owned, error)
	Watch(ctx context.Context, fn func(workspaceID, containerID, action string))
	StartAgent(ctx context.Context, containerID string, a engine.AgentStart) error
	// Commit saves a container's filesystem as an image; CopyVolumes copies
	// a workspace's volumes (and host directory) into another's;
	// RemoveImage removes a committed image.
	Commit(ctx context.Context, containerID, workspaceID, ref string) error
	CopyVolumes(ctx context.Context, spec engine.CopySpec) error
	RemoveImage(ctx context.Context, ref string) error
	DialAgent(ctx context.Context, containerID string) (net.Conn, error)
	// DiskSupport says whether workspaces here can have disks (nil) or why
	// not; BindDisk keeps a stopped container's writable layer on its
	// workspace's disk (Create does it for a new one).
	DiskSupport(ctx context.Context) error
	BindDisk(ctx context.Context, containerID, disk string) error
}

// Disks gives workspaces disks of their own, with a hard size (disk.Pool).
type Disks interface {
	SizeMB() int64
	Create(ctx context.Context, id string, sizeMB int64) (string, error)
	Mount(ctx context.Context, id string) (string, error)
	Clone(ctx context.Context, src, dst string) (string, error)
	Usage(id string) (disk.Usage, error)
	Path(id string) string
	Remove(ctx context.Context, id string) error
	// Owned lists the workspaces of this sidecar that have a disk.
	Owned() ([]string, error)
}

// Images makes sure an image is present (pulling or explaining how to
// build it).
type Images interface {
	Ensure(ctx context.Context, ref string) error
}

// Config configures a Manager. Zero values take the defaults noted.
type Config struct {
	// StateDir holds the records, the worktrees and the scratch logs.
	// Required.
	StateDir string
	// DefaultImage is the image of a workspace whose request names none.
	DefaultImage string
	// Defaults of the limits (4096 MB, 2 CPUs, 4096 processes).
	DefaultMemoryMB int64
	DefaultCPUs     float64
	DefaultPids     int64
	// OutputLimit is the head and tail of each stream in a result (1 MiB).
	OutputLimit int
	// Budget is the sidecar's memory budget: exec answers' output and the
	// agents' stream windows draw on it (nil: unbounded).
	Budget agent.Budget
	// DiffLimit caps a diff's text (8 MiB).
	DiffLimit int
	// MaxFileBytes caps a file upload (256 MiB).
	MaxFileBytes int64
	// InterruptGrace is how long a stopped command gets between SIGINT and
	// SIGKILL (500 ms).
	InterruptGrace time.Duration
	// StopTimeout is how long a stopping container gets before SIGKILL (5 s).
	StopTimeout time.Duration
	// AdoptWait bounds how long a call waits for its workspace's adoption
	// (30 s).
	AdoptWait time.Duration
	// PortHost is the host address forwarded ports listen on (127.0.0.1).
	PortHost string
	// IdleStop stops a running workspace with no activity for this long
	// (0: never), unless its own idle_stop says otherwise; IdleCheck is how
	// often workspaces are looked at (10 s).
	IdleStop  time.Duration
	IdleCheck time.Duration
	// AgentStartTimeout bounds waiting for a started agent to answer (15 s).
	AgentStartTimeout time.Duration
	// Disks gives workspaces their disks (nil: none, no disk limit, and
	// DisksWhy says why).
	Disks    Disks
	DisksWhy error
	// DefaultDiskMB is the disk of a workspace whose request names none
	// (disk.DefaultMB, at most the pool's size).
	DefaultDiskMB int64
	// Network holds workspaces to their network policies (default: none
	// enforced, so only network none).
	Network Network
	// Secrets keeps the credentials workspaces may be granted (default:
	// none); Redactor takes their values, and secret_env's, out of the
	// workspaces' event logs (default: a new one).
	Secrets  Secrets
	Redactor *secrets.Redactor
	// TrustDir is where, inside a workspace granted secrets, its agent
	// writes patina's CA and the bundle of trusted roots
	// (secrets.TrustDir; tests, whose agents run on the host, move it).
	TrustDir string
	// GitAuthor signs patina's commits.
	GitAuthor worktree.Signature
	// Templates makes the templates of repositories with a
	// devcontainer.json (nil: none are made, and such a repository's
	// workspace starts from the default image).
	Templates Templates
	// WarmPool keeps this many default workspaces started for creates to
	// take (pool.go; 0: none), and WarmTemplates this many of each
	// template named; at most MaxWarmPool in all.
	WarmPool      int
	WarmTemplates map[string]int
	// MaxTemplateContext bounds a template's build context (256 MiB).
	MaxTemplateContext int64
	// MaxSnapshot bounds what a snapshot copies of a workspace (its
	// container's changes, files and sessions' state) into the engine's
	// storage (10 GiB).
	MaxSnapshot int64
	// Logger (default: discard).
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.MaxSnapshot <= 0 {
		c.MaxSnapshot = 10 << 30
	}
	if c.MaxTemplateContext <= 0 {
		c.MaxTemplateContext = 256 << 20
	}
	if c.DefaultMemoryMB == 0 {
		c.DefaultMemoryMB = 4096
	}
	if c.DefaultCPUs == 0 {
		c.DefaultCPUs = 2
	}
	if c.DefaultDiskMB == 0 {
		c.DefaultDiskMB = disk.DefaultMB
	}
	if c.DefaultPids == 0 {
		c.DefaultPids = 4096
	}
	if c.OutputLimit == 0 {
		c.OutputLimit = 1 << 20
	}
	if c.DiffLimit == 0 {
		c.DiffLimit = 8 << 20
	}
	if c.MaxFileBytes == 0 {
		c.MaxFileBytes = 256 << 20
	}
	if c.InterruptGrace == 0 {
		c.InterruptGrace = 500 * time.Millisecond
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = 5 * time.Second
	}
	if c.AdoptWait == 0 {
		c.AdoptWait = 30 * time.Second
	}
	if c.PortHost == "" {
		c.PortHost = "127.0.0.1"
	}
	if c.AgentStartTimeout == 0 {
		c.AgentStartTimeout = 15 * time.Second
	}
	if c.GitAuthor.Name == "" {
		c.GitAuthor.Name = "patina"
	}
	if c.GitAuthor.Email == "" {
		c.GitAuthor.Email = "patina@localhost"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Network == nil {
		c.Network = noNetwork{why: "it was started without a network boundary"}
	}
	if c.Secrets == nil {
		c.Secrets = noSecrets{}
	}
	if c.Redactor == nil {
		c.Redactor = secrets.NewRedactor()
	}
	if c.TrustDir == "" {
		c.TrustDir = secrets.TrustDir
	}
	return c
}

// Record formats: what a workspace.json describes.
const (
	// formatLegacy: sessions driven on the host, the user's git dir mounted
	// (before the agent). Adopted stopped, migrated at start.
	formatLegacy = 1
	// formatAgent: the agent inside, the workspace's own repository.
	formatAgent = 2
)

// meta is workspace.json: the sidecar's own record of a workspace, the only
// source of paths, mounts and container settings.
type meta struct {
	Format   int    `json:"format,omitempty"`
	ID       string `json:"id"`
	Name     string `json:"name"`
	Repo     string `json:"repo,omitempty"`
	Branch   string `json:"branch,omitempty"`
	Worktree string `json:"worktree"`
	// Objects are the object stores (host paths of their object
	// directories, a full store first) the workspace's repository borrows
	// from, mounted read-only (objects.go).
	Objects []string `json:"objects,omitempty"`
	// ObjectDirs are the user's object directories, which workspaces made
	// before the object stores mounted read-only; such a workspace moves to
	// Objects at its next start.
	ObjectDirs []string `json:"object_dirs,omitempty"`
	// Shipped: the engine is not on this host; the workspace's files are
	// in its own volume and its base's objects were shipped to it.
	Shipped    bool   `json:"shipped,omitempty"`
	Base       string `json:"base,omitempty"`
	BaseCommit string `json:"base_commit,omitempty"`
	Image      string `json:"image"`
	// Pooled: the workspace waits in the warm pool (hidden until taken).
	Pooled bool `json:"pooled,omitempty"`
	// EnvBySetup: Env reaches the workspace's shells through its agent's
	// setup, not its container's environment (a pooled workspace, made
	// before its env was known).
	EnvBySetup bool `json:"env_by_setup,omitempty"`
	// Template is the template the workspace was made from (its Image is
	// the template's).
	Template string `json:"template,omitempty"`
	// TemplateImage is the id of the template's image when the workspace
	// was made (a pooled workspace of a template rebuilt since is not
	// handed out).
	TemplateImage string `json:"template_image,omitempty"`
	// Network is the policy's mode ("bridge" in older records: open),
	// NetworkAllow its allow list.
	Network      string            `json:"network"`
	NetworkAllow []string          `json:"network_allow,omitempty"`
	MemoryMB     int64             `json:"memory_mb"`
	CPUs         float64           `json:"cpus"`
	PidsLimit    int64             `json:"pids_limit"`
	Env          map[string]string `json:"env,omitempty"`
	// SecretEnv is set in the sessions' environment by the agent, never in
	// the container's configuration; Secrets are the secrets it holds and
	// their placeholders.
	SecretEnv map[string]string `json:"secret_env,omitempty"`
	Secrets   []secrets.Grant   `json:"secrets,omitempty"`
	// ContainerID is the current container.
	ContainerID string `json:"container_id,omitempty"`
	// AgentProtocol is the agent protocol of the patina that made the
	// container (0: a release before this field, whose agent may speak
	// wire.OldProtocol; agent.ClientConfig.OldAgent).
	AgentProtocol int       `json:"agent_protocol,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
	// Stopped: a user stopped it (a dead container is then expected).
	Stopped bool `json:"stopped,omitempty"`
	// AgentToken authenticates the sidecar to the workspace's agent.
	AgentToken string `json:"agent_token,omitempty"`
	// Ports are the workspace's forwarded ports.
	Ports []portRecord `json:"ports,omitempty"`
	// IdleStop is the request's idle_stop ("" for the server's default);
	// IdleStopped says the workspace was stopped for being idle (the next
	// use starts it again).
	IdleStop    string `json:"idle_stop,omitempty"`
	IdleStopped bool   `json:"idle_stopped,omitempty"`
	// IdlePaused: idle stop paused its container (idle.go); the next use
	// thaws it.
	IdlePaused bool `json:"idle_paused,omitempty"`
	// Placement are the request's placement constraints (--engine swarm).
	Placement []string `json:"placement,omitempty"`
	// DiskMB is the size of the workspace's disk (sidecar/disk), which
	// holds its files, its state and its container's writable layer; 0: it
	// has none (made before disks, or where disks are not available).
	DiskMB int64 `json:"disk_mb,omitempty"`
	// ImageID is the image its container is made from when it must be
	// exactly that one (a fork with a disk: its source's image, to which
	// the cloned layer applies); "": Image.
	ImageID string `json:"image_id,omitempty"`
	// ForkOf is the id of the workspace this one was forked from, and
	// ForkImage the image committed from its container for it (removed
	// with this workspace).
	ForkOf    string `json:"fork_of,omitempty"`
	ForkImage string `json:"fork_image,omitempty"`
	// MovedImage is the image committed from the workspace's container
	// when it moved to object stores (its container had to be made anew
	// with other mounts); removed with the workspace.
	MovedImage string `json:"moved_image,omitempty"`
	// Legacy (format 1) fields, kept to migrate.
	GitCommonDir string `json:"git_common_dir,omitempty"`
	GitDir       string `json:"git_dir,omitempty"`
}

// ExecRequest runs one command.
type ExecRequest struct {
	Command string
	// Timeout stops the command (0: never).
	Timeout time.Duration
	// Stdin is the command's input; nil: EOF.
	Stdin []byte
	// TTY runs it on a terminal of that size (nil: on pipes).
	TTY *TTY
}

// ExecResult is a command's result, and whether its workspace had to be
// resumed after an idle stop to run it.
//
// Its output is held against the sidecar's memory budget until Release:
// whoever gets it calls Release once the output is written out.
type ExecResult struct {
	CommandID string
	// ExitCode is the command's status: 0-255, 128+N when signal N ended
	// it.
	ExitCode       int
	Stdout, Stderr ExecOutput
	// TimedOut: the request's Timeout stopped the command.
	TimedOut bool
	// Interrupted: a signal (or a cancelled context) stopped the command.
	Interrupted bool
	// Ended: the shell ended during the command (exit, exec, set -e, a
	// fatal signal); the session accepts no more commands.
	Ended bool
	// ShellReplaced: the shell did not return to its prompt after SIGINT
	// and SIGKILL, so it was killed and a new one started with the state
	// snapshotted before the command. Notice says what was restored.
	ShellReplaced bool
	Notice        string
	// Cwd is the shell's working directory after the command.
	Cwd                string
	StartedAt, EndedAt time.Time
	Resumed            bool
	release            func()
}

// Duration is how long the command ran.
func (r ExecResult) Duration() time.Duration { return r.EndedAt.Sub(r.StartedAt) }

// Release gives the output's memory back to the sidecar's budget (more
// calls do nothing).
func (r ExecResult) Release() {
	if r.release != nil {
		r.release()
	}
}

// OutputRequest reads a command's stdout or stderr.
type OutputRequest struct {
	Session, Command string
	Stream           string // stdout or stderr
	Offset           int64
	Follow           bool
}

// CommitRequest commits everything uncommitted in a workspace.
type CommitRequest struct {
	Message string
	Author  *Signature
}

// CommitResult says what a commit did.
type CommitResult struct {
	Commit    string
	Committed bool
	// Reviewed: Commit records exactly what the last diff showed, so a
	// merge that names no commit takes it (review.go).
	Reviewed bool
	// Repaired: the workspace's repository was broken and was re-seeded
	// at the base commit first (repair.go).
	Repaired string
}

// MergeRequest merges a workspace's branch.
type MergeRequest struct {
	Into string
	// Commit is the commit to merge, whole or abbreviated (what a diff or
	// a commit answer named): it must be on the workspace's branch. Empty
	// means the commit last reviewed (review.go).
	Commit string
}
