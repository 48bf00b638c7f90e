package image

import (
	"context"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
)

// Defaults of a build request.
const (
	// DefaultTag is patina's default workspace image.
	DefaultTag = "patina/base:bookworm"
	// DefaultSuite is the Debian release the default image is made from.
	DefaultSuite = "bookworm"
)

// DefaultPackages returns the packages installed on top of debootstrap's
// minbase variant. (bash and coreutils are already in minbase; listing them
// keeps the promise explicit.) vim-tiny and less are for the people who
// attach a terminal.
func DefaultPackages() []string {
	return []string{"bash", "coreutils", "git", "ca-certificates", "procps", "vim-tiny", "less"}
}

// Labels set on every image Build makes.
const (
	LabelImage    = "dev.patina.image"    // "base"
	LabelSuite    = "dev.patina.suite"    // the Debian suite, e.g. "bookworm"
	LabelPackages = "dev.patina.packages" // comma-separated --include list
)

// ImageAPI is the part of the Docker API this package calls; *client.Client
// satisfies it.
type ImageAPI interface {
	ImageInspect(ctx context.Context, ref string, opts ...client.ImageInspectOption) (image.InspectResponse, error)
	ImageImport(ctx context.Context, source image.ImportSource, ref string, opts image.ImportOptions) (io.ReadCloser, error)
	ImagePull(ctx context.Context, ref string, opts image.PullOptions) (io.ReadCloser, error)
}

var _ ImageAPI = (*client.Client)(nil)

// AptConfig locates an apt configuration.
type AptConfig struct {
	// Root is the directory that holds etc/apt: "/" for the host (the
	// default), a testdata directory in tests.
	Root string
}

// Config tunes a Manager. Zero fields take the defaults given.
type Config struct {
	// Apt is where Build discovers a mirror when a request names none.
	Apt AptConfig
	// Debootstrap is the debootstrap command: default "debootstrap" on PATH,
	// else /usr/sbin/debootstrap.
	Debootstrap string
	// TempDir holds the temporary root filesystem (~350 MB while building):
	// default /var/tmp, or os.TempDir() when that does not exist. It must not
	// be mounted nodev or noexec.
	TempDir string
	// LockDir holds the per-tag build lock files: default os.TempDir().
	LockDir string
	// LockPoll is how often a build waiting for another one's lock retries:
	// default 200ms.
	LockPoll time.Duration
	// APITimeout bounds short Docker calls (inspect): default 30s.
	APITimeout time.Duration
	// PullTimeout bounds a whole pull in Ensure: default 10m.
	PullTimeout time.Duration
	// PullIdleTimeout aborts a pull that reports no progress for this long
	// (an unreachable registry that does not fail fast): default 1m.
	PullIdleTimeout time.Duration
}

func (c Config) withDefaults() Config {
	if c.Apt.Root == "" {
		c.Apt.Root = "/"
	}
	if c.TempDir == "" {
		c.TempDir = "/var/tmp"
		if fi, err := os.Stat(c.TempDir); err != nil || !fi.IsDir() {
			c.TempDir = os.TempDir()
		}
	}
	if c.LockDir == "" {
		c.LockDir = os.TempDir()
	}
	if c.LockPoll <= 0 {
		c.LockPoll = 200 * time.Millisecond
	}
	if c.APITimeout <= 0 {
		c.APITimeout = 30 * time.Second
	}
	if c.PullTimeout <= 0 {
		c.PullTimeout = 10 * time.Minute
	}
	if c.PullIdleTimeout <= 0 {
		c.PullIdleTimeout = time.Minute
	}
	return c
}

// BuildRequest asks for an image built with debootstrap. Zero fields take the
// defaults given.
type BuildRequest struct {
	Tag      string   // default DefaultTag
	Suite    string   // default DefaultSuite
	Mirror   string   // default: discovered from the Manager's AptConfig
	Packages []string // default DefaultPackages()
	// Progress receives debootstrap's output line by line and a line per
	// step; a build takes half a minute or more. Default: discarded.
	Progress io.Writer
	// TempDir overrides Config.TempDir for this build.
	TempDir string
	// IfMissing skips the build when Tag is present, both before and after
	// taking the build lock (so concurrent callers build it once).
	IfMissing bool
}

// BuildResult describes the image a build made (or found, with IfMissing).
type BuildResult struct {
	ID       string        // image ID, "sha256:..."
	Tag      string        // the tag it carries
	Size     int64         // bytes, as Docker reports it
	Mirror   string        // the mirror debootstrap used; empty if not built
	Built    bool          // false when IfMissing found it present
	Duration time.Duration // wall time of the call
}

// EnsureRequest asks for an image to be present.
type EnsureRequest struct {
	Ref string // default DefaultTag
	// Logger receives pull progress at info level; default the Manager's.
	Logger *slog.Logger
}
