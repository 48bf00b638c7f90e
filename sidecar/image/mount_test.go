//go:build linux

package image

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// needMount lets a test that mounts file systems run where this process
// may mount, and says why it skips elsewhere:
//
//   - not root: skipped, as every root-only test of this package is;
//   - root under -short, where mounting is refused (root without
//     CAP_SYS_ADMIN, as in a default container such as Dagger's withExec,
//     or in a user namespace that forbids it): skipped, naming the error;
//   - root in a full run (what CI runs): never skipped, so a missing
//     capability fails the test instead of hiding behind a skip.
func needMount(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	if !testing.Short() {
		return
	}
	if err := probeMount(t.TempDir()); err != nil {
		t.Skipf("-short, and this root may not mount here (%v): needs CAP_SYS_ADMIN, which a default container lacks; a full run as root with it runs this test", err)
	}
}

// probeMount mounts a small tmpfs on dir and unmounts it.
func probeMount(dir string) error {
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		return &os.PathError{Op: "mount tmpfs", Path: dir, Err: err}
	}
	return unix.Unmount(dir, unix.MNT_DETACH)
}
