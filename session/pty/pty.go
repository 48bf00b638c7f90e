// Package pty opens pseudo-terminals on Linux with nothing but /dev/ptmx
// and ioctls: a master the caller reads and writes, and the name of its
// slave for the process that runs on it.
package pty

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// MaxSize is the largest number of rows or columns a terminal may have.
const MaxSize = 1000

// ErrSize: rows or columns out of range.
var ErrSize = errors.New("terminal size out of range")

// Open opens a new pseudo-terminal. The master is non-blocking (reads and
// writes honour deadlines and Close); the slave is unlocked and named by
// the returned path, e.g. /dev/pts/3.
func Open() (master *os.File, slave string, err error) {
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, "", fmt.Errorf("open /dev/ptmx: %w", err)
	}
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		unix.Close(fd)
		return nil, "", fmt.Errorf("unlock pty: %w", err)
	}
	n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN)
	if err != nil {
		unix.Close(fd)
		return nil, "", fmt.Errorf("pty number: %w", err)
	}
	return os.NewFile(uintptr(fd), "/dev/ptmx"), "/dev/pts/" + strconv.FormatUint(uint64(n), 10), nil
}

// OpenSlave opens the slave side for a process to use as its terminal
// (not as the caller's controlling terminal).
func OpenSlave(name string) (*os.File, error) {
	return os.OpenFile(name, os.O_RDWR|unix.O_NOCTTY, 0)
}

// ValidSize checks a terminal size.
func ValidSize(rows, cols int) error {
	if rows < 1 || rows > MaxSize || cols < 1 || cols > MaxSize {
		return fmt.Errorf("%w: %dx%d (rows and cols are 1..%d)", ErrSize, rows, cols, MaxSize)
	}
	return nil
}

// Resize sets the terminal's window size (the processes on it get
// SIGWINCH).
func Resize(master *os.File, rows, cols int) error {
	if err := ValidSize(rows, cols); err != nil {
		return err
	}
	rc, err := master.SyscallConn()
	if err != nil {
		return err
	}
	var ierr error
	err = rc.Control(func(fd uintptr) {
		ierr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: uint16(rows), Col: uint16(cols)})
	})
	if err != nil {
		return err
	}
	if ierr != nil {
		return fmt.Errorf("resize terminal: %w", ierr)
	}
	return nil
}
