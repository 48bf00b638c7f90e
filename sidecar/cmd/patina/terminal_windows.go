package main

import (
	"io"
	"os"
	"time"

	"golang.org/x/sys/windows"
)

// The console of Windows: its size from the screen buffer, raw mode as
// console modes (virtual-terminal input: keys arrive as the escape
// sequences a Linux terminal sends), and no SIGWINCH (the size is polled).

// winSize is the size of the console w writes to, if it is one.
func winSize(w io.Writer) (rows, cols int, ok bool) {
	f, isFile := w.(*os.File)
	if !isFile {
		return 0, 0, false
	}
	var info windows.ConsoleScreenBufferInfo
	if err := windows.GetConsoleScreenBufferInfo(windows.Handle(f.Fd()), &info); err != nil {
		return 0, 0, false
	}
	rows, cols = int(info.Window.Bottom-info.Window.Top)+1, int(info.Window.Right-info.Window.Left)+1
	return rows, cols, rows > 0 && cols > 0
}

// makeRaw puts the console in raw mode (every key goes through as it is,
// Ctrl-C included) and returns how to restore it.
func makeRaw(fd int) (func(), error) {
	h := windows.Handle(fd)
	var old uint32
	if err := windows.GetConsoleMode(h, &old); err != nil {
		return nil, err
	}
	raw := old &^ (windows.ENABLE_ECHO_INPUT | windows.ENABLE_PROCESSED_INPUT | windows.ENABLE_LINE_INPUT)
	raw |= windows.ENABLE_VIRTUAL_TERMINAL_INPUT
	if err := windows.SetConsoleMode(h, raw); err != nil {
		return nil, err
	}
	// The workspace's output is a Linux terminal's: let the console
	// interpret its escape sequences.
	out := windows.Handle(os.Stdout.Fd())
	var outOld uint32
	outSet := windows.GetConsoleMode(out, &outOld) == nil &&
		windows.SetConsoleMode(out, outOld|windows.ENABLE_VIRTUAL_TERMINAL_PROCESSING) == nil
	return func() {
		_ = windows.SetConsoleMode(h, old)
		if outSet {
			_ = windows.SetConsoleMode(out, outOld)
		}
	}, nil
}

// resizePoll is how often the console's size is looked at.
const resizePoll = 500 * time.Millisecond

// watchResize calls fn with out's new size each time it changes (polled),
// until stop.
func watchResize(out io.Writer, fn func(rows, cols int)) (stop func()) {
	done := make(chan struct{})
	go func() {
		r0, c0, _ := winSize(out)
		t := time.NewTicker(resizePoll)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if r, c, ok := winSize(out); ok && (r != r0 || c != c0) {
					r0, c0 = r, c
					fn(r, c)
				}
			}
		}
	}()
	return func() { close(done) }
}

// isTerminal reports whether f is a console.
func isTerminal(f *os.File) bool {
	var mode uint32
	return windows.GetConsoleMode(windows.Handle(f.Fd()), &mode) == nil
}

// noEcho stops the console from echoing what is typed (lines are still
// read whole) and returns how to restore it.
func noEcho(f *os.File) (func(), error) {
	h := windows.Handle(f.Fd())
	var old uint32
	if err := windows.GetConsoleMode(h, &old); err != nil {
		return nil, err
	}
	if err := windows.SetConsoleMode(h, (old&^windows.ENABLE_ECHO_INPUT)|windows.ENABLE_LINE_INPUT); err != nil {
		return nil, err
	}
	return func() { _ = windows.SetConsoleMode(h, old) }, nil
}
