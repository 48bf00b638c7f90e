package session

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// killShell SIGKILLs the session's shell and supervisor from outside the
// session, as `kill -9 -1` in another session does.
func killShell(t *testing.T, s *Session) {
	t.Helper()
	for _, pid := range processPIDs(s) {
		if pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// processPIDs returns the session's supervisor and shell process ids.
func processPIDs(s *Session) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return []int{s.meta.SupervisorPID, s.meta.ShellPID}
}

// waitSnapshot waits for the session's state snapshot: the one taken after
// command after, or any one when after is "".
func waitSnapshot(t *testing.T, s *Session, after string) {
	t.Helper()
	waitFor(t, "a state snapshot", 5*time.Second, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.meta.Snapshot != nil && (after == "" || s.meta.Snapshot.After == after)
	})
}

// A shell killed while idle, by something other than the session's own
// command, comes back from its snapshot on the next command, which says so;
// its history and numbering go on.
func TestRecoverAfterOutsideKill(t *testing.T) {
	m := newManager(t)
	s := mustCreate(t, m, CreateRequest{ID: "victim"})
	dir := t.TempDir()
	out(t, s, "cd "+dir+"; export KEPT=yes; rf() { echo rf; }")
	waitSnapshot(t, s, "1")
	killShell(t, s)
	waitFor(t, "the session to end", 5*time.Second, func() bool { return s.Info().State == StateEnded })
	s2, notice, err := m.Recover(context.Background(), "victim")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(notice, "killed from outside") || !strings.Contains(notice, "after command 1") {
		t.Fatalf("notice: %q", notice)
	}
	res := run(t, s2, `echo "$PWD $KEPT $(rf)"`)
	if string(res.Stdout.Data) != dir+" yes rf\n" || res.CommandID != "2" {
		t.Fatalf("exp restored state as command 2, got %q as %s", res.Stdout.Data, res.CommandID)
	}
	// A usable session is left alone.
	if s3, notice, err := m.Recover(context.Background(), "victim"); err != nil || notice != "" || s3 != s2 {
		t.Fatalf("a live session: %v %q %v", s3 == s2, notice, err)
	}
}

// A session adopted by a new Manager after its processes died while idle
// is recovered too (kill -9 -1 kills the agent with the sessions).
func TestRecoverAfterReattach(t *testing.T) {
	dir := t.TempDir()
	m := newManager(t, func(c *Config) { c.Dir = dir })
	s := mustCreate(t, m, CreateRequest{ID: "adopted"})
	out(t, s, "export KEPT=yes")
	waitSnapshot(t, s, "")
	pids := processPIDs(s)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	// Gone, not only dead: a zombie (not yet reaped, on a busy machine)
	// still answers signal 0, as a live shell does.
	waitFor(t, "the supervisor and the shell to be reaped", 5*time.Second, func() bool {
		return syscall.Kill(pids[0], 0) == syscall.ESRCH && syscall.Kill(pids[1], 0) == syscall.ESRCH
	})
	m2 := newManager(t, func(c *Config) { c.Dir = dir })
	s2, notice, err := m2.Recover(context.Background(), "adopted")
	if err != nil || notice == "" {
		t.Fatalf("recover: %q %v", notice, err)
	}
	if res := run(t, s2, "echo $KEPT"); string(res.Stdout.Data) != "yes\n" || res.CommandID != "2" {
		t.Fatalf("exp yes as command 2, got %q as %s", res.Stdout.Data, res.CommandID)
	}
}

// exit and kill -9 $$ in the session itself still end it: Recover leaves
// it ended; Restart gives it a new shell with its creation settings, and
// its command ids and history go on.
func TestOwnEndStaysEndedAndRestartKeepsHistory(t *testing.T) {
	for _, end := range []string{"exit 4", "kill -9 $$"} {
		t.Run(end, func(t *testing.T) {
			m := newManager(t)
			s := mustCreate(t, m, CreateRequest{ID: "own", Env: map[string]string{"FROM_CREATE": "1"}})
			for i := 0; i < 5; i++ {
				out(t, s, "export N="+strconv.Itoa(i))
			}
			res := run(t, s, end)
			if !res.Ended || res.CommandID != "6" {
				t.Fatalf("exp command 6 to end the shell, got %+v", res)
			}
			s2, notice, err := m.Recover(context.Background(), "own")
			if err != nil || notice != "" {
				t.Fatalf("recover: %q %v", notice, err)
			}
			if _, err := s2.Exec(context.Background(), ExecRequest{Command: "true"}); !errors.Is(err, ErrEnded) {
				t.Fatalf("exp ErrEnded, got %v", err)
			}
			s3, err := m.Restart(context.Background(), "own")
			if err != nil {
				t.Fatal(err)
			}
			res = run(t, s3, `echo "${N-unset} $FROM_CREATE"`)
			if string(res.Stdout.Data) != "unset 1\n" || res.CommandID != "7" {
				t.Fatalf("exp a reset shell as command 7, got %q as %s", res.Stdout.Data, res.CommandID)
			}
			h := s3.History()
			if len(h) != 7 || h[5].ID != "6" || h[5].Command != end {
				t.Fatalf("exp the whole history, got %+v", h)
			}
			if _, err := os.Stat(s3.Dir()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// The first command in a recovered shell says so in its result and its
// history record; the next one does not.
func TestRecoveredResultSaysSo(t *testing.T) {
	m := newManager(t)
	s := mustCreate(t, m, CreateRequest{ID: "said"})
	out(t, s, "true")
	killShell(t, s)
	waitFor(t, "the session to end", 5*time.Second, func() bool { return s.Info().State == StateEnded })
	s2, _, err := m.Recover(context.Background(), "said")
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, s2, "echo hi")
	if !res.ShellReplaced || !strings.Contains(res.Notice, "killed from outside") {
		t.Fatalf("exp the result to say the shell was replaced: %+v", res)
	}
	if ci, _ := s2.Command(res.CommandID); !ci.Replaced {
		t.Fatalf("exp the history to say so: %+v", ci)
	}
	if res := run(t, s2, "echo again"); res.ShellReplaced || res.Notice != "" {
		t.Fatalf("exp a plain result: %+v", res)
	}
}

// A command sent right after the shell was killed from outside (before the
// supervisor's report was read) runs in a recovered shell.
func TestRecoverRightAfterTheKill(t *testing.T) {
	m := newManager(t)
	s := mustCreate(t, m, CreateRequest{ID: "quick"})
	out(t, s, "export KEPT=yes")
	waitSnapshot(t, s, "")
	s.mu.Lock()
	shell := s.meta.ShellPID
	s.mu.Unlock()
	if err := syscall.Kill(shell, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the supervisor to record the exit", 5*time.Second, s.shellExited)
	s2, notice, err := m.Recover(context.Background(), "quick")
	if err != nil || notice == "" {
		t.Fatalf("recover: %q %v", notice, err)
	}
	if res := run(t, s2, "echo $KEPT"); string(res.Stdout.Data) != "yes\n" || !res.ShellReplaced {
		t.Fatalf("exp the state back, got %+v", res)
	}
}

// A shell.exit stamped a few milliseconds before a command's start (the
// coarse clock of file times lagging the one that stamped the command) is
// the command's doing; one from well before is a shell that was already
// gone.
func TestDiedBeforeAllowsTheFileClock(t *testing.T) {
	s := &Session{dir: t.TempDir()}
	c := &command{started: time.Now().UTC()}
	p := filepath.Join(s.dir, exitFile)
	if s.diedBefore(c) {
		t.Fatal("no shell.exit, yet it died before")
	}
	if err := os.WriteFile(p, []byte("4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		lag  time.Duration
		want bool
	}{{-time.Millisecond, false}, {3 * time.Millisecond, false}, {fileClockSlack / 2, false}, {50 * time.Millisecond, true}, {time.Hour, true}} {
		mt := c.started.Add(-tc.lag)
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
		if got := s.diedBefore(c); got != tc.want {
			t.Errorf("shell.exit %v before the command: diedBefore %v, want %v", tc.lag, got, tc.want)
		}
	}
}
