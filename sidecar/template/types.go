package template

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"time"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Image naming and labels.
const (
	// Repository is the image repository templates are tagged in:
	// patina-template:<name>.
	Repository = "patina-template"
	// LabelHash carries the hash of the content that made a template.
	LabelHash = "dev.patina.template.hash"
	// LabelSpec carries the template's spec (JSON: env, workspace folder,
	// ports, the repository, ignored properties).
	LabelSpec = "dev.patina.template.spec"
	// LabelBuild marks the containers and intermediate images of a build.
	LabelBuild = "dev.patina.template.build"
)

// Ref is the image reference of the template named name.
func Ref(name string) string { return Repository + ":" + name }

// Template is a built template.
type Template struct {
	Name string
	// Hash names the content that made it (devcontainer.json, the
	// Dockerfile, the build context's files, or the image).
	Hash string
	// Ref is its image reference (patina-template:<name>); ImageID the
	// image's id.
	Ref, ImageID string
	Spec
	Size      int64
	CreatedAt time.Time
	// Built says that this call built it (false: it existed).
	Built bool
}

// Spec is what a template gives a workspace besides its image.
type Spec struct {
	Repo            string            `json:"repo,omitempty"`
	Source          string            `json:"source,omitempty"` // the file it was made from
	Env             map[string]string `json:"env,omitempty"`
	WorkspaceFolder string            `json:"workspace_folder,omitempty"`
	ForwardPorts    []int             `json:"forward_ports,omitempty"`
	Ignored         []string          `json:"ignored,omitempty"`
}

// Source is what a template is made from, read by the caller from a
// repository at one commit.
type Source struct {
	// Name tags the template (default "dc-" and the first 12 hex digits
	// of its hash).
	Name string
	// Repo and File say where it came from (the record only).
	Repo, File string
	// Config is the parsed devcontainer.json (or, for a Dockerfile named on
	// create, a Config naming it); Raw its bytes (hashed).
	Config Devcontainer
	Raw    []byte
	// Dockerfile is the content of Config.Dockerfile; Context a tar archive
	// of Config.Context (names relative to it).
	Dockerfile []byte
	Context    []byte
	// LoadContext, when set, reads Context: the Manager calls it under its
	// semaphore of one preparation at a time, so that only one context is
	// held in memory however many creates build at once.
	LoadContext func(ctx context.Context) ([]byte, error)
	// BaseImageID is the id of Config.Image (a config without a build).
	BaseImageID string
	// Progress receives the build's and the create commands' output, line
	// by line (default: discarded).
	Progress io.Writer
}

// API is the part of the Docker client the Manager calls.
type API interface {
	ImageBuild(ctx context.Context, buildContext io.Reader, options build.ImageBuildOptions) (build.ImageBuildResponse, error)
	ImageInspect(ctx context.Context, ref string, opts ...client.ImageInspectOption) (image.InspectResponse, error)
	ImageList(ctx context.Context, options image.ListOptions) ([]image.Summary, error)
	ImageRemove(ctx context.Context, ref string, options image.RemoveOptions) ([]image.DeleteResponse, error)
	ImageTag(ctx context.Context, source, target string) error
	ContainerCreate(ctx context.Context, config *container.Config, hostConfig *container.HostConfig, networkingConfig *network.NetworkingConfig, platform *ocispec.Platform, containerName string) (container.CreateResponse, error)
	ContainerStart(ctx context.Context, containerID string, options container.StartOptions) error
	ContainerWait(ctx context.Context, containerID string, condition container.WaitCondition) (<-chan container.WaitResponse, <-chan error)
	ContainerLogs(ctx context.Context, containerID string, options container.LogsOptions) (io.ReadCloser, error)
	ContainerRemove(ctx context.Context, containerID string, options container.RemoveOptions) error
	ContainerCommit(ctx context.Context, containerID string, options container.CommitOptions) (container.CommitResponse, error)
	CopyToContainer(ctx context.Context, containerID, dstPath string, content io.Reader, options container.CopyToContainerOptions) error
	Info(ctx context.Context) (system.Info, error)
}

var _ API = (*client.Client)(nil)

// Config tunes a Manager; zero fields take the defaults noted.
type Config struct {
	// MemoryMB bounds the build's steps and the create commands (2048).
	MemoryMB int64
	// PidsLimit bounds the create commands' processes (4096), and is the
	// build's RUN steps' nproc ulimit (which binds only a non-root USER:
	// the classic builder takes no pids limit).
	PidsLimit int64
	// CPUs bounds the build's steps and the create commands (2, at most
	// the machine's).
	CPUs float64
	// Runtime is the OCI runtime of the create commands' container, the
	// workspaces' own ("": the engine's default). The classic builder
	// cannot be given one: when it differs from the engine's default, a
	// Dockerfile with RUN steps is refused (they would run outside it).
	Runtime string
	// BuildTimeout bounds a whole build, create commands included (20m).
	BuildTimeout time.Duration
	// MaxContextBytes bounds a build context (256 MiB).
	MaxContextBytes int64
	// TailLines is how many last lines of output a failure carries (30).
	TailLines int
	// StateDir labels the build's containers as this sidecar's.
	StateDir string
	Logger   *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.MemoryMB <= 0 {
		c.MemoryMB = 2048
	}
	if c.PidsLimit <= 0 {
		c.PidsLimit = 4096
	}
	if c.CPUs <= 0 {
		c.CPUs = 2
	}
	c.CPUs = min(c.CPUs, float64(runtime.NumCPU()))
	if c.BuildTimeout <= 0 {
		c.BuildTimeout = 20 * time.Minute
	}
	if c.MaxContextBytes <= 0 {
		c.MaxContextBytes = 256 << 20
	}
	if c.TailLines <= 0 {
		c.TailLines = 30
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}
