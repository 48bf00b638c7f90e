package session

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// 12. Close ends the shell and everything the session started, removes the
// FIFOs, and returns promptly even during a command.
func TestClose(t *testing.T) {
	m := newManager(t)
	s := mustCreate(t, m, CreateRequest{ID: "close", Cwd: t.TempDir()})
	run(t, s, "sleep 300 &")
	run(t, s, "nohup sleep 301 >/dev/null 2>&1 &")
	run(t, s, "setsid sleep 302 >/dev/null 2>&1 < /dev/null &") // leaves the process group and session
	run(t, s, "(setsid bash -c 'sleep 303 & disown' &)")        // double fork: re-parented away from the tree
	s.mu.Lock()
	marker := s.meta.Marker
	shell := s.meta.ShellPID
	s.mu.Unlock()
	// supervisor, shell, and four sleeps (the double fork takes a moment).
	waitFor(t, "the session's 6 processes", 5*time.Second, func() bool { return len(markedPIDs(marker)) >= 6 })
	ctx := context.Background()
	id, err := s.Start(ctx, ExecRequest{Command: "sleep 304"})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Close took %s", d)
	}
	res, err := s.Wait(ctx, id)
	if err != nil || !res.Ended {
		t.Fatalf("exp the running command to end with the session, got %+v %v", res, err)
	}
	waitFor(t, "every session process to be gone", 5*time.Second, func() bool { return len(markedPIDs(marker)) == 0 })
	if alive(strconv.Itoa(shell)) {
		t.Fatalf("the shell %d is still alive", shell)
	}
	for _, f := range []string{inFIFO, statFIFO} {
		if _, err := os.Stat(filepath.Join(s.Dir(), f)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("exp FIFO %s removed, got %v", f, err)
		}
	}
	if _, err := s.Exec(ctx, ExecRequest{Command: "true"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("exp ErrClosed after Close, got %v", err)
	}
	// History stays readable; Remove deletes it.
	if len(s.History()) != 5 {
		t.Fatalf("exp 5 history records after Close, got %d", len(s.History()))
	}
	if err := m.Remove(ctx, "close"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("exp the session directory removed, got %v", err)
	}
	if _, err := m.Get("close"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("exp ErrNotFound after Remove, got %v", err)
	}
}

// Creation errors are clear and leave nothing behind.
func TestCreateErrors(t *testing.T) {
	m := newManager(t)
	mustCreate(t, m, CreateRequest{ID: "dup"})
	if _, err := m.Create(context.Background(), CreateRequest{ID: "dup"}); !errors.Is(err, ErrExists) {
		t.Fatalf("exp ErrExists, got %v", err)
	}
	for _, id := range []string{"../x", ".hidden", "-dash", "a b", "a/b", strings.Repeat("x", 65), "é"} {
		if _, err := m.Create(context.Background(), CreateRequest{ID: id}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("id %q: exp ErrInvalid, got %v", id, err)
		}
	}
	if _, err := m.Create(context.Background(), CreateRequest{Env: map[string]string{"A-B": "x"}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("exp ErrInvalid for a bad env name, got %v", err)
	}
	_, err := m.Create(context.Background(), CreateRequest{ID: "nocwd", Cwd: "/does/not/exist"})
	if err == nil {
		t.Fatalf("exp an error for a missing cwd")
	}
	if _, err := os.Stat(filepath.Join(m.cfg.Dir, "nocwd")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed create left its directory behind")
	}
	s := mustCreate(t, m, CreateRequest{})
	if !strings.HasPrefix(s.ID(), "s-") {
		t.Fatalf("exp a generated id, got %q", s.ID())
	}
	if len(m.List()) != 2 {
		t.Fatalf("exp 2 sessions, got %+v", m.List())
	}
}

// 13. A second Manager on the same directory reattaches: live sessions with
// their state, and the result of a command that ran across the switch.
func TestReattachAfterDetach(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	m1, err := Open(ctx, Config{Dir: dir, Launcher: LocalLauncher{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, Config{Dir: dir, Launcher: LocalLauncher{}}); !errors.Is(err, ErrLocked) {
		t.Fatalf("exp ErrLocked for a second live manager, got %v", err)
	}
	s1, err := m1.Create(ctx, CreateRequest{ID: "keep"})
	if err != nil {
		t.Fatal(err)
	}
	out(t, s1, "cd /usr; export KEPT=yes; kf() { echo kf; }; set -o noglob")
	ended, _ := m1.Create(ctx, CreateRequest{ID: "ended"})
	run(t, ended, "exit 5")
	id, err := s1.Start(ctx, ExecRequest{Command: "echo before; sleep 0.5; echo after; (exit 3)"})
	if err != nil {
		t.Fatal(err)
	}
	m1.Close()

	m2, err := Open(ctx, Config{Dir: dir, Launcher: LocalLauncher{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m2.CloseAll(ctx); m2.Close() })
	s2, err := m2.Get("keep")
	if err != nil {
		t.Fatal(err)
	}
	res, err := s2.Wait(ctx, id)
	if err != nil || res.ExitCode != 3 || string(res.Stdout.Data) != "before\nafter\n" {
		t.Fatalf("exp the running command's result, got %+v %v", res, err)
	}
	expectOut(t, s2, `echo "$PWD $KEPT $(kf)" *`, "/usr yes kf *\n")
	// errexit set after the reattach works (the driver learns $- again).
	run(t, s2, "set -e")
	if r := run(t, s2, "! true"); r.Ended {
		t.Fatalf("errexit exemption lost after reattach")
	}
	if r := run(t, s2, "false"); !r.Ended {
		t.Fatalf("exp set -e to end the shell")
	}
	e2, err := m2.Get("ended")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e2.Exec(ctx, ExecRequest{Command: "true"}); !errors.Is(err, ErrEnded) || !strings.Contains(err.Error(), "status 5") {
		t.Fatalf("exp the ended session to stay ended with status 5, got %v", err)
	}
}

// 13. The same after kill -9 of the process holding the Manager, with a
// command running: a helper process (this test binary) creates the session
// and starts the command, then dies.
func TestReattachAfterKill9(t *testing.T) {
	t.Run("command still running", func(t *testing.T) { testReattachAfterKill9(t, 0) })
	t.Run("command ended while detached", func(t *testing.T) { testReattachAfterKill9(t, 1500*time.Millisecond) })
}

func testReattachAfterKill9(t *testing.T, pause time.Duration) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperManagerProcess$")
	cmd.Env = append(os.Environ(), "PATINA_HELPER_DIR="+dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, _ := stdout.Read(buf)
	if !strings.HasPrefix(string(buf[:n]), "ready ") {
		cmd.Process.Kill()
		t.Fatalf("helper did not get ready: %q", buf[:n])
	}
	id := strings.TrimSpace(strings.TrimPrefix(string(buf[:n]), "ready "))
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = cmd.Wait()
	time.Sleep(pause) // let the command finish with nobody attached

	ctx := context.Background()
	m, err := Open(ctx, Config{Dir: dir, Launcher: LocalLauncher{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.CloseAll(ctx); m.Close() })
	s, err := m.Get("crash")
	if err != nil {
		t.Fatal(err)
	}
	ci, err := s.Command(id)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("command %s after reattach: %s", id, ci.State)
	res, err := s.Wait(ctx, id)
	if err != nil || res.ExitCode != 7 || string(res.Stdout.Data) != "start\nfinished\n" {
		t.Fatalf("exp the command's result across the crash, got %+v %v", res, err)
	}
	expectOut(t, s, "echo $PWD $CRASH", "/usr survived\n")
	h := s.History()
	if len(h) != 3 || h[1].ExitCode == nil || *h[1].ExitCode != 7 || h[1].StdoutBytes != 15 {
		t.Fatalf("exp the history to hold the result, got %+v", h)
	}
}

// TestHelperManagerProcess is the process killed by TestReattachAfterKill9.
func TestHelperManagerProcess(t *testing.T) {
	dir := os.Getenv("PATINA_HELPER_DIR")
	if dir == "" {
		t.Skip("helper process for TestReattachAfterKill9, not a test of its own")
	}
	ctx := context.Background()
	m, err := Open(ctx, Config{Dir: dir, Launcher: LocalLauncher{}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.Create(ctx, CreateRequest{ID: "crash"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Exec(ctx, ExecRequest{Command: "cd /usr; export CRASH=survived"}); err != nil {
		t.Fatal(err)
	}
	id, err := s.Start(ctx, ExecRequest{Command: "echo start; sleep 1; echo finished; (exit 7)"})
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("ready " + id + "\n")
	time.Sleep(time.Minute) // killed long before
}
