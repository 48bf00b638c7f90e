package session

import "golang.org/x/sys/unix"

// recycle moves the previous command's output file src, if it stayed
// empty and nobody holds it, to dst (which must not exist): no new inode
// for the next command. It reports whether it did.
func recycle(src, dst string) bool {
	return emptyAndUnused(src) && unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE) == nil
}

// emptyAndUnused reports whether path is empty and no process (in any
// container) has it open: a write lease is granted only then (and only on
// a regular file), and while it is held nobody can open the file to write
// to it. A background job of a command that wrote to the command's output
// after its result was taken, and exited, leaves a non-empty file.
func emptyAndUnused(path string) bool {
	return underLease(path, isEmpty)
}

// underLease calls fn with path open and a write lease on it, and reports
// what fn does; false if path cannot be opened or some process has it open.
func underLease(path string, fn func(fd int) bool) bool {
	fd, err := openRaw(path, unix.O_WRONLY)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	if !leased(fd) {
		return false
	}
	defer unlease(fd)
	return fn(fd)
}

// leased takes a write lease on fd: it fails if any process has the file
// open (fd aside).
func leased(fd int) bool {
	_, err := unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_WRLCK)
	return err == nil
}

func unlease(fd int) { _, _ = unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_UNLCK) }
