package builder

import (
	"log/slog"
	"runtime"
	"time"
)

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
