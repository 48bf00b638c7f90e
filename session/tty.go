package session

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/patina-dev/patina/session/pty"
)

// ttyDrain is how long a TTY command's terminal is read after the command
// ended, for its last bytes (longer only while a background process it
// started still holds the terminal).
const ttyDrain = 200 * time.Millisecond

// ttyCopy is a TTY command's terminal: the master side, copied into the
// command's stdout file.
type ttyCopy struct {
	master *os.File
	slave  *os.File // held so the master never reads a hangup before the command opens the slave
	done   chan struct{}
	once   sync.Once
}

// startTTY opens a terminal of size t for a command whose stdout file is
// out and returns the command text that runs text on it: in a subshell
// whose stdout and stderr (and stdin unless hasStdin) are the terminal.
// The subshell is not a session leader, so the terminal never becomes the
// session shell's controlling terminal.
func startTTY(out string, t TTY, hasStdin bool, text string) (*ttyCopy, string, error) {
	delim, err := heredocDelim("PATINA_TTY_", text)
	if err != nil {
		return nil, "", err
	}
	m, name, err := pty.Open()
	if err != nil {
		return nil, "", err
	}
	fail := func(err error) (*ttyCopy, string, error) {
		m.Close()
		return nil, "", err
	}
	if err := pty.Resize(m, t.Rows, t.Cols); err != nil {
		return fail(err)
	}
	sl, err := pty.OpenSlave(name)
	if err != nil {
		return fail(err)
	}
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		sl.Close()
		return fail(err)
	}
	tc := &ttyCopy{master: m, slave: sl, done: make(chan struct{})}
	go func() {
		defer close(tc.done)
		defer f.Close()
		_, _ = io.Copy(f, m)
	}()
	redir := fmt.Sprintf("0<>%[1]s 1>&0 2>&0", shellQuote(name))
	if hasStdin {
		redir = fmt.Sprintf("1>%[1]s 2>&1", shellQuote(name))
	}
	term := ""
	if t.Term != "" {
		term = "\\builtin export TERM=" + shellQuote(t.Term) + "; "
	}
	wrapped := fmt.Sprintf("( %s\\builtin source /dev/fd/4 ) %s 4<<'%s'\n%s\n%s", term, redir, delim, text, delim)
	return tc, wrapped, nil
}

// finish waits up to wait for the terminal's last bytes once the command
// is gone, then closes it (a background process still on it gets a
// hangup).
func (t *ttyCopy) finish(wait time.Duration) {
	if t == nil {
		return
	}
	t.slave.Close()
	select {
	case <-t.done:
	case <-time.After(wait):
	}
	t.close()
}

// close closes the terminal and waits for the copy to stop. Safe on nil
// and more than once.
func (t *ttyCopy) close() {
	if t == nil {
		return
	}
	t.once.Do(func() {
		t.slave.Close()
		t.master.Close()
	})
	<-t.done
}
