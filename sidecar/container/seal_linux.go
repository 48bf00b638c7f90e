package container

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
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
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	var opts string
	found := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 {
			continue
		}
		if unescapeMountinfo(fields[4]) == dir {
			opts, found = fields[5], true
		}
	}
	return opts, found, sc.Err()
}

func hasOpt(opts, opt string) bool {
	for _, o := range strings.Split(opts, ",") {
		if o == opt {
			return true
		}
	}
	return false
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }
