//go:build !windows

package main

import (
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// winSize is the size of the terminal w writes to, if it is one.
func winSize(w io.Writer) (rows, cols int, ok bool) {
	f, isFile := w.(*os.File)
	if !isFile {
		return 0, 0, false
	}
	sz, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil || sz.Row == 0 || sz.Col == 0 {
		return 0, 0, false
	}
	return int(sz.Row), int(sz.Col), true
}

// makeRaw puts a terminal in raw mode (every key goes through as it is,
// Ctrl-C included) and returns how to restore it.
func makeRaw(fd int) (func(), error) {
	old, err := unix.IoctlGetTermios(fd, ioctlGetTermios)
	if err != nil {
		return nil, err
	}
	raw := *old
	raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	raw.Oflag &^= unix.OPOST
	raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	raw.Cflag &^= unix.CSIZE | unix.PARENB
	raw.Cflag |= unix.CS8
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(fd, ioctlSetTermios, &raw); err != nil {
		return nil, err
	}
	return func() { _ = unix.IoctlSetTermios(fd, ioctlSetTermios, old) }, nil
}

// watchResize calls fn with out's new size each time its terminal is
// resized (SIGWINCH), until stop.
func watchResize(out io.Writer, fn func(rows, cols int)) (stop func()) {
	winch := make(chan os.Signal, 1)
	done := make(chan struct{})
	signal.Notify(winch, syscall.SIGWINCH)
	go func() {
		for {
			select {
			case <-done:
				return
			case <-winch:
				if rows, cols, ok := winSize(out); ok {
					fn(rows, cols)
				}
			}
		}
	}()
	return func() {
		signal.Stop(winch)
		close(done)
	}
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), ioctlGetTermios)
	return err == nil
}

// noEcho stops a terminal from echoing what is typed (lines are still
// read whole) and returns how to restore it.
func noEcho(f *os.File) (func(), error) {
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, ioctlGetTermios)
	if err != nil {
		return nil, err
	}
	t := *old
	t.Lflag &^= unix.ECHO
	t.Lflag |= unix.ICANON
	if err := unix.IoctlSetTermios(fd, ioctlSetTermios, &t); err != nil {
		return nil, err
	}
	return func() { _ = unix.IoctlSetTermios(fd, ioctlSetTermios, old) }, nil
}
