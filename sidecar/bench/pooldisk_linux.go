package bench

import (
	"path/filepath"

	"golang.org/x/sys/unix"
)

// poolUsedBytes is the used space of the disk pool under dir (its XFS
// file system: blocks shared by clones count once).
func poolUsedBytes(dir string) (int64, bool) {
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Join(dir, "pool"), &st); err != nil || st.Type != unix.XFS_SUPER_MAGIC {
		return 0, false
	}
	return int64(st.Blocks-st.Bfree) * st.Bsize, true
}

// settle writes the host's dirty pages out (sync(2)): a workspace that
// just wrote a gigabyte has it in the page caches of its disk, the loop
// device and the pool's file, which the kernel writes back within about
// 30 s anyway; a fork measured then times that writeback, not the fork.
func settle() { unix.Sync() }
