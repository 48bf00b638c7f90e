package session

import (
	"errors"

	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"golang.org/x/sys/unix"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// history is a session's command history: an append-only file of JSON
// lines, one when a command starts and one when it ends, folded in memory.
// It is written by the driver only; a command that ended while no driver was
// attached gets its end record from its exit file at reattach.
type history struct {
	mu    sync.Mutex
	f     *os.File
	list  []*CommandInfo
	index map[string]*CommandInfo
}

// historyRecord is one line of history.jsonl.
type historyRecord struct {
	Kind string `json:"t"` // "start" or "end"
	CommandInfo
}

func openHistory(path string) (*history, error) {
	h := &history{index: map[string]*CommandInfo{}}
	if err := h.load(path); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open history: %w", err)
	}
	h.f = f
	return h, nil
}

func (h *history) load(path string) error {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read history: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		var r historyRecord
		if json.Unmarshal(sc.Bytes(), &r) != nil {
			continue // a torn last line from a crash mid-write
		}
		switch r.Kind {
		case "start":
			ci := r.CommandInfo
			ci.State = CommandRunning
			h.add(&ci)
		case "end":
			if ci, ok := h.index[r.ID]; ok {
				cmd := ci.Command
				*ci = r.CommandInfo
				ci.Command = cmd
			}
		}
	}
	return sc.Err()
}

func (h *history) add(ci *CommandInfo) {
	h.list = append(h.list, ci)
	h.index[ci.ID] = ci
}

// start records a started command.
func (h *history) start(ci CommandInfo) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := ci
	h.add(&c)
	return h.write(historyRecord{Kind: "start", CommandInfo: ci})
}

// end records a finished command.
func (h *history) end(ci CommandInfo) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if cur, ok := h.index[ci.ID]; ok {
		*cur = ci
	}
	rec := ci
	rec.Command = "" // the start record has it
	return h.write(historyRecord{Kind: "end", CommandInfo: rec})
}

func (h *history) write(r historyRecord) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if _, err := h.f.Write(b); err != nil {
		return fmt.Errorf("write history: %w", err)
	}
	return nil
}

func (h *history) get(id string) (CommandInfo, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ci, ok := h.index[id]
	if !ok {
		return CommandInfo{}, false
	}
	return *ci, true
}

func (h *history) all() []CommandInfo {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]CommandInfo, len(h.list))
	for i, ci := range h.list {
		out[i] = *ci
	}
	return out
}

// last returns the newest command, if any.
func (h *history) last() (CommandInfo, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.list) == 0 {
		return CommandInfo{}, false
	}
	return *h.list[len(h.list)-1], true
}

// maxID is the largest numeric command id recorded.
func (h *history) maxID() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	var m uint64
	for _, ci := range h.list {
		if n, err := strconv.ParseUint(ci.ID, 10, 64); err == nil && n > m {
			m = n
		}
	}
	return m
}

func (h *history) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.list)
}

func (h *history) close() error { return h.f.Close() }

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

// removeOutput deletes the command's files.
func (f cmdFiles) removeOutput() {
	_ = os.Remove(f.stdout)
	_ = os.Remove(f.stderr)
	_ = os.Remove(f.stdin)
}

// prepareOutputs makes the output files of command next before it starts,
// without allocating an inode where it can: an output file of the previous
// command that stayed empty (sizes: prevSizes) and that no process holds
// open (no background job of it still writes there: see unused) is renamed
// into place; anything else is created. Called off the hot path, between
// commands. Nothing existing is ever replaced or truncated: the command may
// have started meanwhile.
func prepareOutputs(prev *cmdFiles, prevSizes [2]int64, next cmdFiles) {
	for i, s := range []Stream{Stdout, Stderr} {
		dst := next.stream(s)
		if prev != nil && prevSizes[i] == 0 {
			src := prev.stream(s)
			if unused(src) {
				err := unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE)
				if err == nil || errors.Is(err, unix.EEXIST) {
					continue
				}
			}
		}
		if fh, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE, 0o644); err == nil {
			fh.Close()
		}
	}
}

// unused reports whether no process (in any container) has path open: a
// write lease is granted only then.
func unused(path string) bool {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if _, _, e := syscall.Syscall(syscall.SYS_FCNTL, f.Fd(), syscall.F_SETLEASE, syscall.F_WRLCK); e != 0 {
		return false
	}
	_, _, _ = syscall.Syscall(syscall.SYS_FCNTL, f.Fd(), syscall.F_SETLEASE, syscall.F_UNLCK)
	return true
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
	buf := make([]byte, 4096)
	var b []byte
	for {
		n, err := l.f.ReadAt(buf, l.off+int64(len(b)))
		b = append(b, buf[:n]...)
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
