package disk

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
)

// Sizes, in MiB.
const (
	// MinMB is the smallest disk: room for a repository's checkout, the
	// sessions' state and history, and some packages.
	MinMB = 64
	// DefaultMB is the size of a workspace's disk when nobody says.
	DefaultMB = 10 << 10
)

// DefaultDir is where a host keeps its pool: one for every sidecar on the
// host (so together they cannot fill it), outside any state directory (so
// removing one never walks into a mounted disk).
const DefaultDir = "/var/lib/patina/disks"

// Config configures a Pool.
type Config struct {
	// Dir holds the pool's image, its mount point and the disks' mount
	// points (default DefaultDir).
	Dir string
	// Owner names who owns the disks this Pool creates (the sidecar's
	// state directory): Owned and RemoveOwned see only those.
	Owner string
	// PoolMB is the pool's size when it is made (a sparse image: it takes
	// host space only as workspaces write). 0: 80% of the free space of
	// Dir's file system at that moment. An existing pool keeps its size.
	PoolMB int64
	// Logger (default: discard).
	Logger *slog.Logger
}

// Layout of a disk's root, as mounted on the host: what the container gets.
const (
	// FilesDir is mounted at /workspace.
	FilesDir = "files"
	// StateDir is mounted at /.patina/state.
	StateDir = "state"
	// LayerDir holds the container's writable layer (see container).
	LayerDir = "layer"
)

// idRE is a workspace id as patina makes them (a uuid, 16 hex digits).
var idRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,63}$`)

func checkID(id string) error {
	if !idRE.MatchString(id) {
		return fmt.Errorf("%w: workspace id %q", ErrInvalid, id)
	}
	return nil
}

// paths of the pool under Dir.
type paths struct{ dir string }

func (p paths) poolImage() string      { return filepath.Join(p.dir, "pool.img") }
func (p paths) poolMount() string      { return filepath.Join(p.dir, "pool") }
func (p paths) image(id string) string { return filepath.Join(p.poolMount(), id+".img") }
func (p paths) mounts() string         { return filepath.Join(p.dir, "mnt") }
func (p paths) mount(id string) string { return filepath.Join(p.mounts(), id) }
func (p paths) owner(id string) string { return filepath.Join(p.poolMount(), id+".owner") }
func (p paths) lock() string           { return filepath.Join(p.dir, "pool.lock") }
