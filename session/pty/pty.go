// Package pty opens pseudo-terminals on Linux with nothing but /dev/ptmx
// and ioctls: a master the caller reads and writes, and the name of its
// slave for the process that runs on it.
package pty

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// MaxSize is the largest number of rows or columns a terminal may have.
const MaxSize = 1000

// ErrSize: rows or columns out of range.
var ErrSize = errors.New("terminal size out of range")

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
