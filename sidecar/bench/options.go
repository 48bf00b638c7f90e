package bench

import (
	"io"
	"time"

	"github.com/patina-dev/patina/sidecar/image"
)

// Options configure Run. Zero fields take the defaults given.
type Options struct {
	// Binary is the patina executable Run starts as `Binary serve`
	// (required).
	Binary string
	// Image is the workspaces' image (default image.DefaultTag). It must be
	// present: Run does not build it.
	Image string
	// Samples is the number of sequential HTTP execs measured (default 1000),
	// after Warmup unmeasured ones (default 100).
	Samples int
	Warmup  int
	// DockerSamples is the number of Docker API execs measured (default 50).
	DockerSamples int
	// CreateSamples is the number of workspaces created to time create →
	// first exec (default 5).
	CreateSamples int
	// Sessions and Execs shape the concurrent run: Sessions sessions, each
	// driven by its own goroutine running Execs execs (defaults 100 and 100).
	Sessions int
	Execs    int
	// StreamBytes is the output a command writes and the client streams
	// (default 1 GB); DiffBytes the size of the file in the workspace whose
	// diff is taken (default 300 MB). The sidecar's RSS is read after both.
	StreamBytes int64
	DiffBytes   int64
	// GitFiles is the size, in files, of the repository whose `git status`
	// is timed inside a workspace and in the repository itself (default
	// 10,000).
	GitFiles int
	// RepoHistoryBytes is the random content in the history of the
	// GitFiles-file repository whose workspaces' creation is timed
	// (default 100 MB; 1000 MB makes the 1 GB repository of hack/bigrepo).
	RepoHistoryBytes int64
	// RelaySamples is the number of execs timed through the exec relay (the
	// path of a remote engine or a sidecar in a container), on a second
	// sidecar started with --agent-transport exec (default 200).
	RelaySamples int
	// PortSamples is the number of HTTP requests timed through a forwarded
	// port and to the container's address each (default 500); PortBytes
	// the size of the response whose throughput is measured both ways
	// (default 512 MB).
	PortSamples int
	PortBytes   int64
	// ForkBytes is the size of the files installed outside /workspace in
	// the workspace whose fork is timed (default 1 GiB, in 1 MiB files).
	ForkBytes int64
	// MemExecs commands at once each write MemOutputBytes to stdout and as
	// many to stderr (defaults 40 and 4 MB), and MemConnections
	// connections through forwarded ports are never read (default 1,000):
	// the sidecar's RSS peak is sampled under each load.
	MemExecs       int
	MemOutputBytes int64
	MemConnections int
	// Progress receives a line per step (default: discarded).
	Progress io.Writer
	// StartTimeout bounds the sidecar's start (default
	// defaultStartTimeout).
	StartTimeout time.Duration
	// Docker is the Docker API for the baseline and for cleaning up (default:
	// a client from the environment, DOCKER_HOST etc.).
	Docker DockerAPI
}

func (o Options) withDefaults() Options {
	if o.Image == "" {
		o.Image = image.DefaultTag
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.Samples, 1000)
	if o.Warmup < 0 {
		o.Warmup = 0
	} else if o.Warmup == 0 {
		o.Warmup = 100
	}
	def(&o.DockerSamples, 50)
	def(&o.CreateSamples, 5)
	def(&o.Sessions, 100)
	def(&o.Execs, 100)
	if o.StreamBytes <= 0 {
		o.StreamBytes = 1_000_000_000
	}
	if o.DiffBytes <= 0 {
		o.DiffBytes = 300_000_000
	}
	def(&o.GitFiles, 10_000)
	if o.RepoHistoryBytes <= 0 {
		o.RepoHistoryBytes = 100_000_000
	}
	def(&o.RelaySamples, 200)
	def(&o.PortSamples, 500)
	if o.PortBytes <= 0 {
		o.PortBytes = 512_000_000
	}
	if o.ForkBytes < 1<<20 {
		o.ForkBytes = 1 << 30
	}
	def(&o.MemExecs, 40)
	if o.MemOutputBytes <= 0 {
		o.MemOutputBytes = 4_000_000
	}
	def(&o.MemConnections, 1000)
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = defaultStartTimeout
	}
	return o
}
