package session

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/patina-dev/patina/session/pty"
)

// termShell runs a loan's shell on a real terminal, as the agent does, and
// collects what it prints.
type termShell struct {
	cmd    *exec.Cmd
	master *os.File
	mu     sync.Mutex
	out    bytes.Buffer
	done   chan struct{}
}

func startTerm(t *testing.T, l *Loan) *termShell {
	t.Helper()
	m, name, err := pty.Open()
	if err != nil {
		t.Fatalf("open pty: %v", err)
	}
	if err := pty.Resize(m, 30, 100); err != nil {
		t.Fatal(err)
	}
	sl, err := pty.OpenSlave(name)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(l.Shell, "--rcfile", l.RCFile, "-i")
	cmd.Env = append(append(os.Environ(), l.Env...), "TERM=xterm-256color")
	cmd.Dir = l.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = sl, sl, sl
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start terminal shell: %v", err)
	}
	sl.Close()
	ts := &termShell{cmd: cmd, master: m, done: make(chan struct{})}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := m.Read(buf)
			ts.mu.Lock()
			ts.out.Write(buf[:n])
			ts.mu.Unlock()
			if err != nil {
				close(ts.done)
				return
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
		m.Close()
	})
	return ts
}

// expect waits until the terminal has printed want.
func (ts *termShell) expect(t *testing.T, want string) {
	t.Helper()
	waitFor(t, "terminal output "+want, 10*time.Second, func() bool {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		return strings.Contains(ts.out.String(), want)
	})
}

func (ts *termShell) typeLine(t *testing.T, line string) {
	t.Helper()
	if _, err := ts.master.Write([]byte(line + "\r")); err != nil {
		t.Fatalf("type %q: %v", line, err)
	}
}

// wait waits for the terminal's shell to exit.
func (ts *termShell) wait(t *testing.T) {
	t.Helper()
	ch := make(chan error, 1)
	go func() { ch <- ts.cmd.Wait() }()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("the terminal's shell did not exit")
	}
}

// TestLoanCarriesStateBothWays: a terminal starts where the session is, the
// session refuses commands while it is lent, and what was typed in the
// terminal (cd, export, a function, an alias) is there for the next exec,
// whether the person typed exit or the terminal was hung up.
func TestLoanCarriesStateBothWays(t *testing.T) {
	m := newManager(t)
	s := mustCreate(t, m, CreateRequest{ID: "t"})
	dir := t.TempDir()
	out(t, s, "mkdir -p "+dir+"/a "+dir+"/b && export FROM_SESSION='x y' && sf() { echo sf-ran; } && alias sa='echo sa-ran' && set -o pipefail")
	term := out(t, s, `echo "${TERM-unset}"`)
	const hupProbe = `trap -p HUP; [[ $(awk '/^SigIgn/ {print $2}' /proc/self/status) =~ [13579bdf]$ ]] && echo hup-ignored; echo probed`
	hupBefore := out(t, s, hupProbe)

	for _, how := range []string{"exit", "hangup"} {
		t.Run(how, func(t *testing.T) {
			ctx := context.Background()
			out(t, s, "cd "+dir+"/a")
			l, err := s.Lend(ctx)
			if err != nil {
				t.Fatalf("lend: %v", err)
			}
			if _, err := s.Lend(ctx); !errors.Is(err, ErrBusy) {
				t.Fatalf("second lend: exp ErrBusy, got %v", err)
			}
			if _, err := s.Exec(ctx, ExecRequest{Command: "true"}); !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "terminal") {
				t.Fatalf("exec while lent: exp ErrBusy naming the terminal, got %v", err)
			}
			if !s.Info().Terminal {
				t.Fatal("Info().Terminal is false while lent")
			}
			ts := startTerm(t, l)
			ts.typeLine(t, `echo "seen:$PWD:$FROM_SESSION:$(sf):$(shopt -o pipefail | tr -s ' \t' '-'):[$TERM]"; sa`)
			ts.expect(t, "seen:"+dir+"/a:x y:sf-ran:pipefail-on:[xterm-256color]")
			ts.expect(t, "sa-ran")
			ts.typeLine(t, "cd "+dir+"/b; export TYPED_"+how+"=yes; tf() { echo tf-$1; }; alias ta='echo ta-ran'; unset FROM_SESSION; echo ok-$((1+1))")
			ts.expect(t, "ok-2")
			if how == "exit" {
				ts.typeLine(t, "exit")
			} else {
				// A real hangup: the terminal goes; the kernel sends the
				// shell SIGHUP and its reads fail.
				ts.master.Close()
			}
			ts.wait(t)
			if err := l.Return(ctx); err != nil {
				t.Fatalf("return: %v", err)
			}
			if s.Info().Terminal {
				t.Fatal("Info().Terminal still true after Return")
			}
			expectOut(t, s, `echo "$PWD|$TYPED_`+how+`|$(tf 1)|$(sf)|${TERM-unset}"; ta`, dir+"/b|yes|tf-1|sf-ran|"+term+"ta-ran\n")
			// The session's shell is still driven: no prompt, no history,
			// no line editing crept in with the terminal's options.
			expectOut(t, s, `echo "[$PS1]"; [[ -o history ]] && echo history; [[ -o emacs ]] && echo emacs; [[ -o vi ]] && echo vi; echo clean`, "[]\nclean\n")
			// Nor the terminal's HUP trap: the session's SIGHUP, and its
			// commands', is as it was before the loan (default, or ignored
			// if patina itself was started ignoring it, as under nohup).
			expectOut(t, s, hupProbe, hupBefore)
			for _, f := range []string{loanState, loanRC, loanReturn} {
				if _, err := os.Stat(filepath.Join(s.Dir(), f)); err == nil {
					t.Fatalf("%s left behind after Return", f)
				}
			}
		})
	}
}

// TestLoanKilledTerminal: a terminal shell killed outright leaves no state;
// the session comes back as it was lent.
func TestLoanKilledTerminal(t *testing.T) {
	m := newManager(t)
	s := mustCreate(t, m, CreateRequest{ID: "k"})
	out(t, s, "export KEEP=1")
	l, err := s.Lend(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ts := startTerm(t, l)
	ts.typeLine(t, "export LOST=1; echo typed-$((1+1))")
	ts.expect(t, "typed-2")
	_ = ts.cmd.Process.Kill()
	ts.wait(t)
	if err := l.Return(context.Background()); err != nil {
		t.Fatal(err)
	}
	expectOut(t, s, `echo "$KEEP${LOST-}"`, "1\n")
}

// TestLendBusyOrEnded: a running command or an ended shell refuses a loan.
func TestLendBusyOrEnded(t *testing.T) {
	m := newManager(t)
	s := mustCreate(t, m, CreateRequest{ID: "b"})
	id, err := s.Start(context.Background(), ExecRequest{Command: "sleep 5"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lend(context.Background()); !errors.Is(err, ErrBusy) {
		t.Fatalf("lend while %s runs: exp ErrBusy, got %v", id, err)
	}
	if err := s.Signal(context.Background(), id, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Wait(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	run(t, s, "exit 3")
	if _, err := s.Lend(context.Background()); !errors.Is(err, ErrEnded) {
		t.Fatalf("lend of an ended session: exp ErrEnded, got %v", err)
	}
}

// TestExecTTY: a TTY command sees a terminal of the asked size on stdout
// and stdin, its output (CR LF) is its stdout, it sees the session's state
// and its own changes stay in its subshell; with stdin, stdin is the bytes.
func TestExecTTY(t *testing.T) {
	m := newManager(t)
	s := mustCreate(t, m, CreateRequest{ID: "tty"})
	out(t, s, "export SV=v; cd /tmp")
	res := runReq(t, s, ExecRequest{Command: `[[ -t 0 && -t 1 && -t 2 ]] && echo tty; stty size; echo "$SV $PWD"; cd /; exit 4`, TTY: &TTY{Rows: 33, Cols: 77}})
	if res.ExitCode != 4 || string(res.Stdout.Data) != "tty\r\n33 77\r\nv /tmp\r\n" || len(res.Stderr.Data) != 0 {
		t.Fatalf("tty exec: exit %d stdout %q stderr %q", res.ExitCode, res.Stdout.Data, res.Stderr.Data)
	}
	expectOut(t, s, "pwd", "/tmp\n")
	res = runReq(t, s, ExecRequest{Command: `[[ -t 0 ]] || cat; [[ -t 1 ]] && echo " out-tty"`, Stdin: []byte("piped"), TTY: &TTY{Rows: 5, Cols: 5}})
	if string(res.Stdout.Data) != "piped out-tty\r\n" {
		t.Fatalf("tty exec with stdin: stdout %q", res.Stdout.Data)
	}
	// A big burst is all there when the result comes back.
	res = runReq(t, s, ExecRequest{Command: `head -c 300000 /dev/zero | tr '\0' x; echo`, TTY: &TTY{Rows: 24, Cols: 80}})
	if n := bytes.Count(res.Stdout.Data, []byte("x")); n != 300000 {
		t.Fatalf("tty exec burst: %d of 300000 bytes", n)
	}
	if _, err := s.Exec(context.Background(), ExecRequest{Command: "true", TTY: &TTY{Rows: 0, Cols: 80}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("tty 0 rows: exp ErrInvalid, got %v", err)
	}
	// An interrupted TTY command stops like any other.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	res, err := s.Exec(ctx, ExecRequest{Command: "read line; echo never", TTY: &TTY{Rows: 24, Cols: 80}})
	if !errors.Is(err, context.DeadlineExceeded) || !res.Interrupted {
		t.Fatalf("tty exec waiting on its terminal: exp interrupted by the deadline, got %v %+v", err, res)
	}
	expectOut(t, s, "echo after", "after\n")
}

// TestFlushSnapshots: a session snapshots at most once a second by itself;
// FlushSnapshots makes the snapshot current at once (before a stop).
func TestFlushSnapshots(t *testing.T) {
	m := newManager(t)
	s := mustCreate(t, m, CreateRequest{ID: "f"})
	out(t, s, "export FIRST=1")
	time.Sleep(100 * time.Millisecond) // the first snapshot is taken
	out(t, s, "export SECOND=flushed")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m.FlushSnapshots(ctx)
	s.mu.Lock()
	sn := s.meta.Snapshot
	s.mu.Unlock()
	if sn == nil {
		t.Fatal("no snapshot after FlushSnapshots")
	}
	b, err := os.ReadFile(sn.File)
	if err != nil || !bytes.Contains(b, []byte("SECOND=")) {
		t.Fatalf("the flushed snapshot lacks the last command's state (%v)", err)
	}
}
