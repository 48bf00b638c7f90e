package session

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// cmdFiles are a command's files in c/: its stdin (only when given) and its
// output, created ahead of time while the session is idle. Creating an
// inode can cost most of a millisecond on some filesystems, and truncating a
// non-empty file a fifth of one, so the hot path does neither: the command
// text travels in the command line (a here-document, i.e. a pipe), statuses
// are appended to the session's exits log, and output goes to empty files
// made beforehand.
type cmdFiles struct {
	stdin, stdout, stderr string
}

// internalID names internal commands (SetEnv).
const internalID = "env"

func filesFor(dir, id string) cmdFiles {
	base := filepath.Join(dir, "c", id)
	return cmdFiles{stdin: base + ".in", stdout: base + ".out", stderr: base + ".err"}
}

func (f cmdFiles) stream(s Stream) string {
	if s == Stderr {
		return f.stderr
	}
	return f.stdout
}

// outputs reads the command's two streams as a result holds them (each
// whole, or its head and tail of limit bytes).
func (f cmdFiles) outputs(limit int) (stdout, stderr Output) {
	return readOutputResult(f.stdout, limit), readOutputResult(f.stderr, limit)
}

// removeOutput deletes the command's files: one system call each (a stdin
// file is rarely made, and os.Remove tries rmdir too when unlink fails).
func (f cmdFiles) removeOutput() {
	for _, p := range []string{f.stdout, f.stderr, f.stdin} {
		_ = unix.Unlink(p)
	}
}

// prepareOutputs makes the output files of command next before it starts,
// off the hot path, between commands. It reports whether both files are
// known to be empty: the shell then opens them without truncating
// (wrapperFormat), else it truncates them. Nothing existing is ever
// truncated here: the command may have started meanwhile (after
// waitPrepared gave up).
func prepareOutputs(next cmdFiles) (clean bool) {
	clean = makeEmpty(next.stdout)
	return makeEmpty(next.stderr) && clean
}

// makeEmpty creates path, or finds it empty.
func makeEmpty(path string) bool {
	fd, err := openRaw(path, unix.O_WRONLY|unix.O_CREAT)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	return isEmpty(fd)
}

// isEmpty reports whether fd's file has no bytes.
func isEmpty(fd int) bool {
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && st.Size == 0
}

// openRaw opens path without an *os.File: these files are only created or
// tested, never read or written here, and os.OpenFile may cost five more
// system calls (it tries to register the descriptor with the poller). It
// never blocks: O_NONBLOCK makes a FIFO planted in c/ fail at once instead
// of waiting for a reader.
func openRaw(path string, flags int) (int, error) {
	for {
		fd, err := unix.Open(path, flags|unix.O_CLOEXEC|unix.O_NONBLOCK, 0o644)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// exitsLog is a session's exits file: one "ID STATUS" line per command,
// appended by the shell (or by the driver for a command it had to stop).
type exitsLog struct {
	path string
	f    *os.File // kept open for reading
	off  int64    // where the driver has read up to
}

// appendExit records a status the shell could not (an aborted command).
func (l *exitsLog) appendExit(id string, code int) error {
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%s %d\n", id, code)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// open opens the log for reading (creating it), once.
func (l *exitsLog) open() error {
	if l.f != nil {
		return nil
	}
	f, err := os.OpenFile(l.path, os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	l.f = f
	return nil
}

func (l *exitsLog) close() {
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
}

// next reads what was appended since the last call and returns the status
// of id, if among it (the latest entry wins).
func (l *exitsLog) next(id string) (int, bool) {
	if l.open() != nil {
		return 0, false
	}
	// pread directly: os.File.ReadAt reads again until its buffer is
	// full or at EOF, a second system call on each command's path.
	buf := make([]byte, 4096)
	var b []byte
	for {
		n, err := unix.Pread(int(l.f.Fd()), buf, l.off+int64(len(b)))
		if n > 0 {
			b = append(b, buf[:n]...)
		}
		if err != nil || n < len(buf) || len(b) >= 1<<20 {
			break
		}
	}
	// Only whole lines count.
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[:i+1]
	} else {
		b = nil
	}
	l.off += int64(len(b))
	return findExit(b, id)
}

// skipToEnd makes next read only what is appended from now on.
func (l *exitsLog) skipToEnd() {
	if st, err := os.Stat(l.path); err == nil {
		l.off = st.Size()
	}
}

// find looks for id's status near the end of the log (reattach), and
// moves the read offset to the end.
func (l *exitsLog) find(id string) (int, bool) {
	f, err := os.Open(l.path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, false
	}
	l.off = st.Size()
	from := max(st.Size()-64<<10, 0)
	b := make([]byte, st.Size()-from)
	n, _ := f.ReadAt(b, from)
	return findExit(b[:n], id)
}

func findExit(b []byte, id string) (code int, ok bool) {
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || f[0] != id {
			continue
		}
		if n, err := strconv.Atoi(f[1]); err == nil {
			code, ok = n, true
		}
	}
	return code, ok
}

func timePtr(t time.Time) *time.Time { return &t }
func intPtr(n int) *int              { return &n }
