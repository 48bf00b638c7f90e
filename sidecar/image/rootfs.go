//go:build linux

package image

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// unsafeIOConf is a dpkg configuration file that Build places in the tree
// before debootstrap runs and removes afterwards. Without fsync after every
// unpacked file, debootstrap's install phase took 48 s instead of 77 s here;
// a crash mid-build loses nothing of value, as the tree is thrown away.
const unsafeIOConf = "etc/dpkg/dpkg.cfg.d/patina-unsafe-io"

// seedRootfs prepares an empty build directory for debootstrap.
func seedRootfs(dir string) error {
	path := filepath.Join(dir, unsafeIOConf)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("seed rootfs: %w", err)
	}
	if err := os.WriteFile(path, []byte("force-unsafe-io\n"), 0o644); err != nil {
		return fmt.Errorf("seed rootfs: %w", err)
	}
	return nil
}

// scrubRootfs removes from a fresh debootstrap tree what a container image
// should not carry: the downloaded .deb files and apt's package lists and
// caches (~100 MB; `apt-get update` fetches fresh ones), and the host's
// resolv.conf and hostname, which debootstrap copies in (Docker provides
// its own at run time), and the build's dpkg setting (unsafeIOConf). All paths are resolved inside dir (os.Root), so a
// symlink in the tree can never lead outside it.
func scrubRootfs(dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("scrub rootfs: %w", err)
	}
	defer root.Close()
	// Directory contents to empty, except the names kept.
	empty := []struct {
		dir  string
		keep []string
		glob string
	}{
		{dir: "var/cache/apt/archives", keep: []string{"lock", "partial"}},
		{dir: "var/cache/apt/archives/partial"},
		{dir: "var/cache/apt", glob: "*.bin"},
		{dir: "var/lib/apt/lists", keep: []string{"lock", "partial", "auxfiles"}},
		{dir: "var/lib/apt/lists/partial"},
		{dir: "var/cache/debconf", glob: "*-old"},
	}
	for _, e := range empty {
		names, err := readDirNames(root, e.dir)
		if err != nil {
			return fmt.Errorf("scrub rootfs: %w", err)
		}
		for _, name := range names {
			if slices.Contains(e.keep, name) {
				continue
			}
			if e.glob != "" {
				if ok, _ := filepath.Match(e.glob, name); !ok {
					continue
				}
			}
			if err := root.RemoveAll(e.dir + "/" + name); err != nil {
				return fmt.Errorf("scrub rootfs: %w", err)
			}
		}
	}
	if err := root.Remove(unsafeIOConf); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("scrub rootfs: %w", err)
	}
	for _, name := range []string{"etc/resolv.conf", "etc/hostname"} {
		if err := root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("scrub rootfs: %w", err)
		}
		if err := root.WriteFile(name, nil, 0o644); err != nil {
			return fmt.Errorf("scrub rootfs: %w", err)
		}
	}
	return nil
}

// readDirNames lists a directory inside root; a missing one is empty.
func readDirNames(root *os.Root, dir string) ([]string, error) {
	f, err := root.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// removeRootfs deletes a build's temporary tree. debootstrap mounts /proc,
// /sys and sometimes the host's /dev inside it while it runs; if it was
// killed these stay mounted, and deleting through them would touch the
// host. So mounts under dir are detached first, and if any remains nothing
// is deleted.
func removeRootfs(dir string) error {
	dir = filepath.Clean(dir)
	mounts, err := mountsUnder(dir)
	if err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	for _, m := range mounts { // deepest first
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("remove %s: unmount %s: %w", dir, m, err)
		}
	}
	if mounts, err = mountsUnder(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	if len(mounts) > 0 {
		return fmt.Errorf("remove %s: still mounted: %s; not deleting", dir, strings.Join(mounts, ", "))
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}

// mountsUnder returns the mount points at or below dir, deepest first, from
// /proc/self/mountinfo.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		// 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return slices.Compact(out), nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space ...).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// checkBuildDir reports why dir cannot hold a debootstrap tree: debootstrap
// must create device nodes there and run programs from it.
func checkBuildDir(dir string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("build dir %s: %w", dir, err)
	}
	var bad []string
	if st.Flags&unix.ST_NODEV != 0 {
		bad = append(bad, "nodev")
	}
	if st.Flags&unix.ST_NOEXEC != 0 {
		bad = append(bad, "noexec")
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: build dir %s is on a %s mount; choose another TempDir", ErrInvalid, dir, strings.Join(bad, ","))
	}
	return nil
}
