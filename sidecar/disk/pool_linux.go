//go:build linux

package disk

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/patina-dev/patina/internal/mountinfo"
)

// Pool keeps the workspaces' disks.
type Pool struct {
	cfg    Config
	log    *slog.Logger
	p      paths
	sizeMB int64
}

// Timings.
const (
	// toolTimeout bounds one mkfs or mount (they take milliseconds; a
	// loaded host, seconds).
	toolTimeout = 60 * time.Second
	// minPoolMB is the smallest pool worth making.
	minPoolMB = 1 << 10
	// lockPoll is how often a wait for the pool's lock looks again.
	lockPoll = 20 * time.Millisecond
)

// FIFREEZE and FITHAW (linux/fs.h: _IOWR('X', 119, int), _IOWR('X', 120,
// int)); x/sys/unix does not name them.
const (
	ioctlFreeze = 0xC0045877
	ioctlThaw   = 0xC0045878
)

// Open opens the pool in cfg.Dir, making and mounting it if needed. It
// answers ErrUnsupported (saying why) where disks cannot be had.
func Open(ctx context.Context, cfg Config) (*Pool, error) {
	if cfg.Dir == "" {
		cfg.Dir = DefaultDir
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: the sidecar is not root, so it cannot mount workspaces' disks", ErrUnsupported)
	}
	for tool, pkg := range map[string]string{"mkfs.xfs": "xfsprogs", "mkfs.ext4": "e2fsprogs", "mount": "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%w: %s is not installed (apt-get install -y %s)", ErrUnsupported, tool, pkg)
		}
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	pl := &Pool{cfg: cfg, log: cfg.Logger.With("component", "disk"), p: paths{dir: dir}}
	for _, d := range []string{dir, pl.p.poolMount(), pl.p.mounts()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("make %s: %w", d, err)
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return nil, err
		}
	}
	if err := pl.ensurePool(ctx); err != nil {
		return nil, err
	}
	if err := pl.checkReflink(); err != nil {
		return nil, err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(pl.p.poolMount(), &st); err != nil {
		return nil, err
	}
	pl.sizeMB = int64(st.Blocks) * st.Bsize >> 20
	pl.thawAll()
	return pl, nil
}

// ensurePool makes and mounts the pool unless it is: under a lock, as
// several sidecars of one host (or tests) may start at once.
func (pl *Pool) ensurePool(ctx context.Context) error {
	lf, err := os.OpenFile(pl.p.lock(), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lf.Close()
	if err := lockFile(ctx, lf); err != nil {
		return err
	}
	if isMounted(pl.p.poolMount(), "xfs") {
		return nil
	}
	if _, err := os.Stat(pl.p.poolImage()); errors.Is(err, fs.ErrNotExist) {
		if err := pl.makePool(ctx); err != nil {
			return err
		}
	}
	if err := mount(ctx, pl.p.poolImage(), pl.p.poolMount(), "xfs", ""); err != nil {
		return fmt.Errorf("%w: mount the disk pool: %v", ErrUnsupported, err)
	}
	return nil
}

// lockFile takes an exclusive flock on f, polling so ctx can end the wait.
func lockFile(ctx context.Context, f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the disk pool's lock: %w", ctx.Err())
		case <-time.After(lockPoll):
		}
	}
}

// makePool makes the pool's image: a sparse file of cfg.PoolMB, XFS with
// reflink.
func (pl *Pool) makePool(ctx context.Context) error {
	sizeMB := pl.cfg.PoolMB
	if sizeMB == 0 {
		var st unix.Statfs_t
		if err := unix.Statfs(pl.p.dir, &st); err != nil {
			return err
		}
		sizeMB = int64(st.Bavail) * st.Bsize >> 20 * 8 / 10
	}
	if sizeMB < minPoolMB {
		return fmt.Errorf("%w: the disk pool would get %d MiB (80%% of the free space under %s); it needs at least %d MiB", ErrUnsupported, sizeMB, pl.p.dir, minPoolMB)
	}
	img := pl.p.poolImage()
	if err := makeSparse(img, sizeMB); err != nil {
		return err
	}
	if err := run(ctx, "mkfs.xfs", "-q", "-K", "-m", "reflink=1", img); err != nil {
		os.Remove(img)
		return fmt.Errorf("%w: make the disk pool: %v", ErrUnsupported, err)
	}
	pl.log.Info("made the workspaces' disk pool", "image", img, "size_mb", sizeMB)
	return nil
}

// checkReflink makes sure the pool clones files by reference.
func (pl *Pool) checkReflink() error {
	a := filepath.Join(pl.p.poolMount(), ".reflink-check")
	b := a + ".clone"
	defer os.Remove(a)
	defer os.Remove(b)
	if err := os.WriteFile(a, []byte("patina"), 0o600); err != nil {
		return err
	}
	if err := cloneFile(a, b); err != nil {
		return fmt.Errorf("%w: the disk pool cannot clone files (%v)", ErrUnsupported, err)
	}
	return nil
}

// SizeMB is the pool's size: the most any one disk can have, and what all
// of them together can use.
func (pl *Pool) SizeMB() int64 { return pl.sizeMB }

// Path is where the disk of workspace id is mounted on the host (mounted
// or not).
func (pl *Pool) Path(id string) string { return pl.p.mount(id) }

// Create makes and mounts a disk of sizeMB for workspace id, with its
// directories (FilesDir, StateDir, LayerDir), and returns its mount point.
func (pl *Pool) Create(ctx context.Context, id string, sizeMB int64) (string, error) {
	if err := checkID(id); err != nil {
		return "", err
	}
	if sizeMB < MinMB || sizeMB > pl.sizeMB {
		return "", fmt.Errorf("%w: a disk of %d MiB (from %d to the pool's %d)", ErrInvalid, sizeMB, MinMB, pl.sizeMB)
	}
	img := pl.p.image(id)
	if err := makeSparse(img, sizeMB); err != nil {
		return "", err
	}
	if err := pl.own(id); err != nil {
		pl.remove(id)
		return "", err
	}
	dir, err := pl.format(ctx, id, img)
	if err != nil {
		pl.remove(id)
		return "", err
	}
	return dir, nil
}

// own records that this pool's owner owns workspace id's disk.
func (pl *Pool) own(id string) error {
	return os.WriteFile(pl.p.owner(id), []byte(pl.cfg.Owner+"\n"), 0o600)
}

// format makes an ext4 file system in img (no space reserved for root:
// the workspace is root) and mounts it with the disk's directories.
func (pl *Pool) format(ctx context.Context, id, img string) (string, error) {
	if err := run(ctx, "mkfs.ext4", "-q", "-F", "-b", "4096", "-m", "0", "-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard", img); err != nil {
		return "", fmt.Errorf("make the disk of workspace %s: %w", id, err)
	}
	dir, err := pl.Mount(ctx, id)
	if err != nil {
		return "", err
	}
	// The disk's root is root's alone on the host: nothing of what the
	// workspace writes is reachable by another host user.
	if err := os.Chmod(dir, 0o700); err != nil {
		return "", err
	}
	for name, mode := range map[string]os.FileMode{FilesDir: 0o755, StateDir: 0o755, LayerDir: 0o700} {
		d := filepath.Join(dir, name)
		if err := os.Mkdir(d, mode); err != nil {
			return "", err
		}
		if err := os.Chmod(d, mode); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// Mount mounts workspace id's disk if it is not (after the host
// restarted) and returns its mount point.
func (pl *Pool) Mount(ctx context.Context, id string) (string, error) {
	if err := checkID(id); err != nil {
		return "", err
	}
	dir := pl.p.mount(id)
	if isMounted(dir, "ext4") {
		return dir, nil
	}
	img := pl.p.image(id)
	if _, err := os.Stat(img); errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("workspace %s: %w", id, ErrNotFound)
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	// nosuid,nodev: a setuid file or a device node the workspace made is
	// nothing on the host (nor in the container: MKNOD is dropped and
	// no-new-privileges set). discard: what the workspace deletes goes back
	// to the pool.
	if err := mount(ctx, img, dir, "ext4", "nosuid,nodev,discard,noinit_itable"); err != nil {
		return "", fmt.Errorf("mount the disk of workspace %s: %w", id, err)
	}
	return dir, nil
}

// Clone makes workspace dst's disk a copy of workspace src's as it is now,
// sharing every block until one of them writes it: src's file system is
// frozen for the moment of the clone (its writers wait), so the copy is
// consistent. It returns dst's mount point.
func (pl *Pool) Clone(ctx context.Context, src, dst string) (string, error) {
	if err := checkID(dst); err != nil {
		return "", err
	}
	srcDir, err := pl.Mount(ctx, src)
	if err != nil {
		return "", err
	}
	if err := pl.cloneFrozen(srcDir, pl.p.image(src), pl.p.image(dst)); err != nil {
		return "", fmt.Errorf("clone the disk of workspace %s: %w", src, err)
	}
	if err := pl.own(dst); err != nil {
		pl.remove(dst)
		return "", err
	}
	dir, err := pl.Mount(ctx, dst)
	if err != nil {
		pl.remove(dst)
		return "", err
	}
	return dir, nil
}

func (pl *Pool) cloneFrozen(mountDir, from, to string) error {
	d, err := os.Open(mountDir)
	if err != nil {
		return err
	}
	defer d.Close()
	if _, err := os.Stat(to); err == nil {
		return fmt.Errorf("workspace disk %s: %w", filepath.Base(to), ErrExists)
	}
	if err := ioctl(d, ioctlFreeze); err != nil {
		return fmt.Errorf("freeze: %w", err)
	}
	err = cloneFile(from, to)
	if terr := ioctl(d, ioctlThaw); terr != nil {
		pl.log.Error("thaw a workspace's disk after a clone", "dir", mountDir, "err", terr)
	}
	return err
}

// Usage is how much of a disk is used.
type Usage struct {
	UsedMB, SizeMB int64
}

// Usage reports how full workspace id's disk is (it must be mounted).
func (pl *Pool) Usage(id string) (Usage, error) {
	if err := checkID(id); err != nil {
		return Usage{}, err
	}
	dir := pl.p.mount(id)
	if !isMounted(dir, "ext4") {
		return Usage{}, fmt.Errorf("workspace %s: %w", id, ErrNotFound)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return Usage{}, err
	}
	return Usage{
		UsedMB: int64(st.Blocks-st.Bfree) * st.Bsize >> 20,
		SizeMB: int64(st.Blocks) * st.Bsize >> 20,
	}, nil
}

// Remove unmounts and deletes workspace id's disk. Its container must be
// gone (nothing may use the disk any more); a missing disk is no error.
func (pl *Pool) Remove(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	return pl.remove(id)
}

func (pl *Pool) remove(id string) error { return removeDisk(pl.p, id) }

func removeDisk(p paths, id string) error {
	dir := p.mount(id)
	if err := unmountUnder(dir); err != nil {
		return err
	}
	for _, f := range []string{dir, p.image(id), p.owner(id)} {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove the disk of workspace %s: %w", id, err)
		}
	}
	return nil
}

// Owned lists the workspaces of this pool's owner that have a disk.
func (pl *Pool) Owned() ([]string, error) { return owned(pl.p, pl.cfg.Owner) }

func owned(p paths, owner string) ([]string, error) {
	ents, err := os.ReadDir(p.poolMount())
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".owner")
		if !ok || !e.Type().IsRegular() || checkID(id) != nil {
			continue
		}
		b, err := os.ReadFile(p.owner(id))
		if err == nil && strings.TrimSuffix(string(b), "\n") == owner {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// RemoveOwned removes every disk owner has in the pool in dir (default
// DefaultDir): the end of a test's or a benchmark's sidecar, after its
// containers are gone. No pool there: nothing to do.
func RemoveOwned(dir, owner string) error {
	if dir == "" {
		dir = DefaultDir
	}
	p := paths{dir: dir}
	if !isMounted(p.poolMount(), "xfs") {
		return nil
	}
	ids, err := owned(p, owner)
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		errs = append(errs, removeDisk(p, id))
	}
	return errors.Join(errs...)
}

// thawAll thaws every mounted disk: a sidecar killed while cloning leaves
// its source frozen.
func (pl *Pool) thawAll() {
	ms, err := mountinfo.Under(pl.p.mounts())
	if err != nil {
		return
	}
	for _, m := range ms {
		if m.FSType != "ext4" || filepath.Dir(m.Point) != pl.p.mounts() {
			continue
		}
		if d, err := os.Open(m.Point); err == nil {
			if ioctl(d, ioctlThaw) == nil {
				pl.log.Warn("thawed a workspace's disk left frozen", "dir", m.Point)
			}
			d.Close()
		}
	}
}

// removePool unmounts everything under dir (a pool's Config.Dir) and
// removes it (the package's tests).
func removePool(dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := unmountUnder(dir); err != nil {
		return err
	}
	return os.RemoveAll(dir)
}

// unmountUnder detaches every mount at or below dir, innermost first.
func unmountUnder(dir string) error {
	ms, err := mountinfo.Under(dir)
	if err != nil {
		return err
	}
	slices.Reverse(ms)
	for _, m := range ms {
		if err := unix.Unmount(m.Point, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("unmount %s: %w", m.Point, err)
		}
	}
	return nil
}

func isMounted(dir, fstype string) bool {
	m, ok, err := mountinfo.At(dir)
	return err == nil && ok && m.FSType == fstype
}

// makeSparse creates path (it must not exist) as a sparse file of sizeMB.
func makeSparse(path string, sizeMB int64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s: %w", filepath.Base(path), ErrExists)
	}
	if err != nil {
		return err
	}
	err = f.Truncate(sizeMB << 20)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

// cloneFile makes to (which must not exist) a clone of from, by reference.
func cloneFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	err = unix.IoctlFileClone(int(dst.Fd()), int(src.Fd()))
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(to)
	}
	return err
}

// ioctl makes a request that takes no argument (the kernel ignores it).
func ioctl(f *os.File, req uint) error { return unix.IoctlSetInt(int(f.Fd()), req, 0) }

// mount mounts the image img at dir through a loop device that goes away
// with the mount (mount(8) sets autoclear).
func mount(ctx context.Context, img, dir, fstype, opts string) error {
	o := "loop"
	if opts != "" {
		o += "," + opts
	}
	return run(ctx, "mount", "-t", fstype, "-o", o, img, dir)
}

// run runs a tool, bounded, and returns its output in the error.
func run(ctx context.Context, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, toolTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if len(msg) > 2048 {
			msg = msg[:2048]
		}
		return fmt.Errorf("%s: %w: %s", name, err, msg)
	}
	return nil
}
