package hostdir

import (
	"errors"
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/patina-dev/patina/internal/mountinfo"
)

// A repository workspace's files are a host directory mounted at
// /workspace. Anything root in the container writes there lands on the
// host: a setuid-root binary, say. Docker's bind mounts (and its local
// volume driver, which applies nosuid only with ro) cannot make such a
// mount nosuid, so the sidecar makes the host directory itself a bind mount
// of itself with nosuid and nodev: the flags hold on the host (a setuid
// file there gives no privileges to a host user who runs it) and carry into
// the container's mount. Together with MKNOD and SETFCAP being dropped, no
// file a workspace makes works as a privilege on the host.

// ErrCannotSeal: this process may not mount (not root, or in a container
// without the capability); the directory is then protected only by its
// parents' 0700 modes.
var ErrCannotSeal = errors.New("cannot make the directory nosuid,nodev")

// Seal makes dir a nosuid,nodev bind mount of itself (idempotent).
func Seal(dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	opts, mounted, err := mountOptions(dir)
	if err != nil {
		return err
	}
	if mounted && hasOpt(opts, "nosuid") && hasOpt(opts, "nodev") {
		return nil
	}
	if !mounted {
		if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("%w: bind %s: %v", ErrCannotSeal, dir, err)
		}
	}
	flags := uintptr(unix.MS_REMOUNT | unix.MS_BIND | unix.MS_NOSUID | unix.MS_NODEV)
	// A remount keeps only the flags it is given: carry over the others.
	for opt, f := range map[string]uintptr{"ro": unix.MS_RDONLY, "noexec": unix.MS_NOEXEC, "noatime": unix.MS_NOATIME, "nodiratime": unix.MS_NODIRATIME, "relatime": unix.MS_RELATIME} {
		if hasOpt(opts, opt) {
			flags |= f
		}
	}
	if err := unix.Mount("", dir, "", flags, ""); err != nil {
		if !mounted {
			_ = unix.Unmount(dir, unix.MNT_DETACH)
		}
		return fmt.Errorf("%w: remount %s: %v", ErrCannotSeal, dir, err)
	}
	return nil
}

// Unseal removes the bind mount Seal made (if any).
func Unseal(dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if _, mounted, err := mountOptions(dir); err != nil || !mounted {
		return err
	}
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	return nil
}

// Sealed reports whether dir is a nosuid,nodev mount.
func Sealed(dir string) bool {
	opts, mounted, err := mountOptions(dir)
	return err == nil && mounted && hasOpt(opts, "nosuid") && hasOpt(opts, "nodev")
}

// mountOptions returns the per-mount options of the mount at dir (the
// last one mounted there), and whether there is one.
func mountOptions(dir string) (string, bool, error) {
	m, ok, err := mountinfo.At(dir)
	return m.Options, ok, err
}

func hasOpt(opts, opt string) bool { return mountinfo.Mount{Options: opts}.HasOption(opt) }
