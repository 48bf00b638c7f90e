//go:build linux

package image

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// mkTree creates files (with content) and directories (names ending in /)
// under root.
func mkTree(t *testing.T, root string, names ...string) {
	t.Helper()
	for _, name := range names {
		path := filepath.Join(root, name)
		if name[len(name)-1] == '/' {
			must(t, os.MkdirAll(path, 0o755))
			continue
		}
		must(t, os.MkdirAll(filepath.Dir(path), 0o755))
		must(t, os.WriteFile(path, []byte(name), 0o644))
	}
}

func TestScrubRootfs(t *testing.T) {
	root := t.TempDir()
	mkTree(t, root,
		"var/cache/apt/archives/bash_5.2_amd64.deb", "var/cache/apt/archives/lock", "var/cache/apt/archives/partial/x.deb",
		"var/cache/apt/pkgcache.bin", "var/cache/apt/srcpkgcache.bin", "var/cache/apt/keep.conf",
		"var/lib/apt/lists/deb.example.invalid_debian_dists_bookworm_InRelease", "var/lib/apt/lists/lock",
		"var/lib/apt/lists/partial/", "var/lib/apt/lists/auxfiles/",
		"var/cache/debconf/config.dat", "var/cache/debconf/config.dat-old",
		"etc/resolv.conf", "etc/hostname", "etc/os-release", "etc/dpkg/dpkg.cfg.d/excludes",
	)
	must(t, seedRootfs(root))
	must(t, scrubRootfs(root))
	tests := []struct {
		name string
		exp  bool // still there
	}{
		{"var/cache/apt/archives/bash_5.2_amd64.deb", false},
		{"var/cache/apt/archives/lock", true},
		{"var/cache/apt/archives/partial/", true},
		{"var/cache/apt/archives/partial/x.deb", false},
		{"var/cache/apt/pkgcache.bin", false},
		{"var/cache/apt/srcpkgcache.bin", false},
		{"var/cache/apt/keep.conf", true},
		{"var/lib/apt/lists/deb.example.invalid_debian_dists_bookworm_InRelease", false},
		{"var/lib/apt/lists/lock", true},
		{"var/lib/apt/lists/partial/", true},
		{"var/lib/apt/lists/auxfiles/", true},
		{"var/cache/debconf/config.dat", true},
		{"var/cache/debconf/config.dat-old", false},
		{"etc/os-release", true},
		{"etc/dpkg/dpkg.cfg.d/excludes", true},
		{unsafeIOConf, false},
	}
	for _, tt := range tests {
		_, err := os.Lstat(filepath.Join(root, tt.name))
		if got := err == nil; got != tt.exp {
			t.Errorf("%s: exp present=%v, got %v (%v)", tt.name, tt.exp, got, err)
		}
	}
	for _, name := range []string{"etc/resolv.conf", "etc/hostname"} {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil || len(b) != 0 {
			t.Errorf("%s: exp empty, got %q, %v", name, b, err)
		}
	}
}

// TestScrubRootfsStaysInside: a symlink in the tree pointing out of it must
// not lead the scrub to the host's files.
func TestScrubRootfsStaysInside(t *testing.T) {
	outside, root := t.TempDir(), t.TempDir()
	mkTree(t, outside, "pkgcache.bin")
	mkTree(t, root, "var/cache/")
	must(t, os.Symlink(outside, filepath.Join(root, "var/cache/apt")))
	_ = scrubRootfs(root) // an error is fine; touching outside is not
	if _, err := os.Stat(filepath.Join(outside, "pkgcache.bin")); err != nil {
		t.Fatalf("exp the file outside the tree kept, got %v", err)
	}
}

func TestRemoveRootfs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rootfs")
	mkTree(t, dir, "usr/bin/x", "proc/", "sys/")
	must(t, removeRootfs(dir))
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("exp %s gone, got %v", dir, err)
	}
}

// TestRemoveRootfsMounted: file systems still mounted in the tree, as a
// killed debootstrap leaves them, are unmounted before the tree is removed.
func TestRemoveRootfsMounted(t *testing.T) {
	needMount(t)
	dir := filepath.Join(t.TempDir(), "rootfs")
	mkTree(t, dir, "usr/bin/x", "proc/", "sys/")
	must(t, unix.Mount("tmpfs", filepath.Join(dir, "proc"), "tmpfs", 0, "size=1m"))
	must(t, unix.Mount("tmpfs", filepath.Join(dir, "sys"), "tmpfs", 0, "size=1m"))
	mkTree(t, dir, "proc/inside")
	t.Cleanup(func() {
		unix.Unmount(filepath.Join(dir, "proc"), unix.MNT_DETACH)
		unix.Unmount(filepath.Join(dir, "sys"), unix.MNT_DETACH)
	})
	must(t, removeRootfs(dir))
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("exp %s gone, got %v", dir, err)
	}
	if mounts, err := mountsUnder(dir); err != nil || len(mounts) != 0 {
		t.Fatalf("exp no mounts left, got %v, %v", mounts, err)
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, exp := range map[string]string{
		`/var/tmp/a`:          "/var/tmp/a",
		`/var/tmp/a\040b`:     "/var/tmp/a b",
		`/x\011y\134z`:        "/x\ty\\z",
		`/trailing\04`:        `/trailing\04`,
		`/not\999octal\`:      `/not\999octal\`,
		`/two\040\040spaces`:  "/two  spaces",
		`/newline\012in\040`:  "/newline\nin ",
		`\040leading`:         " leading",
		`/plain/with/slashes`: "/plain/with/slashes",
	} {
		if got := unescapeMount(in); got != exp {
			t.Errorf("unescapeMount(%q): exp %q, got %q", in, exp, got)
		}
	}
}

func TestCheckBuildDir(t *testing.T) {
	if err := checkBuildDir(t.TempDir()); err != nil {
		t.Logf("the test temp dir is not usable for builds: %v", err)
	}
	needMount(t)
	dir := t.TempDir()
	must(t, unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NODEV|unix.MS_NOEXEC, "size=1m"))
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	err := checkBuildDir(dir)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "nodev,noexec mount") {
		t.Fatalf("exp ErrInvalid naming nodev,noexec, got %v", err)
	}
}
