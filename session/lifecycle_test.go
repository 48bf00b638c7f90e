package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// 5. A background child never delays the exec past its foreground command
// and keeps running in the session afterwards.
func TestBackgroundChildren(t *testing.T) {
	m := newManager(t)
	s := mustCreate(t, m, CreateRequest{ID: "bg", Cwd: t.TempDir()})
	cases := []struct{ name, cmd string }{
		{"plain", "sleep 300 & echo $! > pid1"},
		{"nohup with log", "nohup sleep 300 >log 2>&1 & echo $! > pid2"},
		{"holds stdout open", "(sleep 300; echo late) & echo $! > pid3"},
		{"holds stderr open", "(sleep 300 >&2) & echo $! > pid4"},
		{"disowned", "sleep 300 & disown; echo $! > pid5"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := run(t, s, c.cmd)
			if res.ExitCode != 0 {
				t.Fatalf("exit %d: %s", res.ExitCode, res.Stderr.Data)
			}
			// Guard against the Daytona #4230 hang: the exec must return
			// while the child lives (300 s).
			if res.Duration() > 10*time.Second {
				t.Fatalf("exec took %s: it waited for its background child", res.Duration())
			}
			pid := strings.TrimSpace(out(t, s, "cat pid"+string(rune('1'+i))))
			if !alive(pid) {
				t.Fatalf("background child %s is not running after the exec", pid)
			}
		})
	}
	// The jobs are still in the shell's job table.
	if got := out(t, s, "jobs -p | wc -l"); strings.TrimSpace(got) == "0" {
		t.Fatalf("exp background jobs in the job table, got none")
	}
}

// 6. A command that ends the shell returns promptly with its status; the
// next exec fails with ErrEnded saying how.
func TestShellEnds(t *testing.T) {
	cases := []struct {
		cmd  string
		exit int
	}{
		{"exit 3", 3},
		{"echo bye; exit", 0},
		{"set -e; false", 1},
		{"exec true", 0},
		{"kill -9 $$", 137},
		{"exec bash -c 'exit 9'", 9},
	}
	m := newManager(t)
	for i, c := range cases {
		t.Run(c.cmd, func(t *testing.T) {
			s := mustCreate(t, m, CreateRequest{ID: "end" + string(rune('a'+i))})
			run(t, s, "sleep 300 &") // a background job must not keep it alive
			res := run(t, s, c.cmd)
			if res.ExitCode != c.exit || !res.Ended {
				t.Fatalf("exp exit %d ended, got exit %d ended %v", c.exit, res.ExitCode, res.Ended)
			}
			_, err := s.Exec(context.Background(), ExecRequest{Command: "echo again"})
			var ee *EndedError
			if !errors.Is(err, ErrEnded) || !errors.As(err, &ee) || ee.ExitCode != c.exit {
				t.Fatalf("exp ErrEnded with status %d, got %v", c.exit, err)
			}
			if !strings.Contains(err.Error(), c.cmd[:4]) {
				t.Fatalf("exp the error to name the command, got %q", err)
			}
			if st := s.Info().State; st != StateEnded {
				t.Fatalf("exp state ended, got %s", st)
			}
		})
	}
}

// 6. errexit is exact: bash's exemptions keep the shell alive as in a
// terminal, and a failing command ends it.
func TestErrexitSemantics(t *testing.T) {
	m := newManager(t)
	s := mustCreate(t, m, CreateRequest{ID: "errexit"})
	run(t, s, "set -e")
	for _, cmd := range []string{"! true", "false && true", "false || true", "if false; then :; fi", "f() { false; }; f || echo handled"} {
		res := run(t, s, cmd)
		if res.Ended {
			t.Fatalf("%q ended the shell under set -e; a terminal survives it", cmd)
		}
	}
	expectOut(t, s, "[[ $- == *e* ]] && echo still-errexit", "still-errexit\n")
	res := run(t, s, "echo before; false; echo after")
	if !res.Ended || res.ExitCode != 1 || string(res.Stdout.Data) != "before\n" {
		t.Fatalf("exp errexit to end the shell at false, got exit %d ended %v out %q", res.ExitCode, res.Ended, res.Stdout.Data)
	}
}

// 7. A timeout stops the foreground command and its tree, returns the output
// so far, and keeps the session with the state the command left.
func TestTimeoutKeepsState(t *testing.T) {
	m := newManager(t)
	s := mustCreate(t, m, CreateRequest{ID: "timeout", Cwd: t.TempDir()})
	// Durations no other process on the machine uses (the end-to-end
	// tests' workspaces run `sleep 300` too, visible in this /proc).
	run(t, s, "sleep 30117 & echo $! > bgpid") // an earlier background job
	res := runReq(t, s, ExecRequest{
		Command: "cd /usr; export DURING=1; f() { echo fn; }; echo before; echo err >&2\n" +
			"bash -c 'sleep 30118 & sleep 30118'; echo after",
		Timeout: 300 * time.Millisecond,
	})
	if !res.TimedOut || res.Ended || res.ShellReplaced {
		t.Fatalf("exp timed out, alive, same shell; got %+v", res)
	}
	if res.ExitCode != 130 {
		t.Fatalf("exp exit 130 (SIGINT), got %d", res.ExitCode)
	}
	if string(res.Stdout.Data) != "before\n" || string(res.Stderr.Data) != "err\n" {
		t.Fatalf("exp output so far, got %q / %q", res.Stdout.Data, res.Stderr.Data)
	}
	// $? is the stopped command's status.
	expectOut(t, s, "echo $?", "130\n")
	// The state the command built before it was stopped is there.
	expectOut(t, s, `echo "$PWD $DURING $(f)"`, "/usr 1 fn\n")
	// The earlier background job survived; the command's tree did not.
	bg := strings.TrimSpace(out(t, s, "cat $OLDPWD/bgpid"))
	if !alive(bg) {
		t.Fatalf("the earlier background job %s was killed by the timeout", bg)
	}
	ps := out(t, s, `for p in /proc/[0-9]*; do c=$(tr '\0' ' ' <$p/cmdline 2>/dev/null); [[ $c == "sleep 3011"[78]" " ]] && echo ${p#/proc/}; done; true`)
	if n := len(strings.Fields(ps)); n != 1 {
		t.Fatalf("exp only the earlier background sleep left, found %d: %q", n, ps)
	}
}

// 7. A busy loop in the shell itself is interrupted too.
func TestTimeoutShellBusyLoop(t *testing.T) {
	m := newManager(t)
	s := mustCreate(t, m, CreateRequest{ID: "busy"})
	res := runReq(t, s, ExecRequest{Command: "X=1; while :; do :; done", Timeout: 200 * time.Millisecond})
	if !res.TimedOut || res.ShellReplaced || res.Ended {
		t.Fatalf("exp timed out in the same shell, got %+v", res)
	}
	expectOut(t, s, "echo $X", "1\n")
}

// 7. A shell that cannot be interrupted (SIGINT ignored, busy in a builtin
// loop) is replaced and restored from the snapshot taken before the command;
// the result says so, and the next exec works.
func TestTimeoutReplacesWedgedShell(t *testing.T) {
	m := newManager(t)
	s := mustCreate(t, m, CreateRequest{ID: "wedge"})
	dir := t.TempDir()
	out(t, s, "cd "+dir+"; export KEEP=kept; keepfn() { echo fn-kept; }; alias ka='echo alias-kept'; set -o noglob")
	// Let the idle snapshot happen.
	waitSnapshot(t, s, "1")
	start := time.Now()
	res := runReq(t, s, ExecRequest{Command: "trap '' INT; LOST=1; while :; do :; done", Timeout: 200 * time.Millisecond})
	if !res.TimedOut || !res.ShellReplaced || res.Ended {
		t.Fatalf("exp a replaced shell, got %+v", res)
	}
	if !strings.Contains(res.Notice, "replaced") || !strings.Contains(res.Notice, "after command 1") {
		t.Fatalf("exp the notice to explain the restore, got %q", res.Notice)
	}
	t.Logf("timeout to result: %s", time.Since(start))
	next := time.Now()
	expectOut(t, s, `echo "$PWD $KEEP ${LOST-none} $(keepfn)"; ka; echo *`, dir+" kept none fn-kept\nalias-kept\n*\n")
	t.Logf("next exec after the replacement: %s", time.Since(next))
	if got := s.Info().Replacements; got != 1 {
		t.Fatalf("exp 1 replacement, got %d", got)
	}
}

// 7. A command that handles SIGINT and carries on is killed after the grace.
func TestTimeoutEscalatesToKill(t *testing.T) {
	m := newManager(t)
	s := mustCreate(t, m, CreateRequest{ID: "escalate"})
	res := runReq(t, s, ExecRequest{
		Command: `bash -c 'trap "echo got-int" INT; while :; do sleep 0.05; done'; echo next`,
		Timeout: 200 * time.Millisecond,
	})
	if !res.TimedOut || res.Ended {
		t.Fatalf("exp timed out, got %+v", res)
	}
	if strings.Contains(string(res.Stdout.Data), "next") {
		t.Fatalf("the rest of the command line ran after the stop: %q", res.Stdout.Data)
	}
	expectOut(t, s, "echo ok", "ok\n")
}

// 7. Signal stops a running command the same way.
func TestSignal(t *testing.T) {
	m := newManager(t)
	s := mustCreate(t, m, CreateRequest{ID: "signal"})
	ctx := context.Background()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sigName(sig), func(t *testing.T) {
			id, err := s.Start(ctx, ExecRequest{Command: "export SIGNALLED=" + sigName(sig) + "; echo started; sleep 300; echo after"})
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, "started", 5*time.Second, func() bool {
				b, _ := s.ReadOutput(id, Stdout, 0, 100)
				return string(b) == "started\n"
			})
			if err := s.Signal(ctx, id, sig); err != nil {
				t.Fatal(err)
			}
			res, err := s.Wait(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Interrupted || res.TimedOut || string(res.Stdout.Data) != "started\n" {
				t.Fatalf("exp interrupted with output so far, got %+v", res)
			}
			expectOut(t, s, "echo $SIGNALLED", sigName(sig)+"\n")
		})
	}
	// A non-stopping signal is only delivered.
	id, err := s.Start(ctx, ExecRequest{Command: `trap 'echo usr1' USR1; echo ready; for i in $(seq 100); do sleep 0.05; done`})
	if err != nil {
		t.Fatal(err)
	}
	_ = id
	if err := s.Signal(ctx, "999", syscall.SIGINT); !errors.Is(err, ErrNotFound) {
		t.Fatalf("exp ErrNotFound for an unknown command, got %v", err)
	}
	if err := s.Signal(ctx, "1", syscall.SIGINT); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("exp ErrNotRunning for a finished command, got %v", err)
	}
	if err := s.Signal(ctx, id, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Wait(ctx, id); err != nil {
		t.Fatal(err)
	}
}

// Cancelling the context of Exec stops the command.
func TestExecContextCancel(t *testing.T) {
	m := newManager(t)
	s := mustCreate(t, m, CreateRequest{ID: "cancel"})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	res, err := s.Exec(ctx, ExecRequest{Command: "sleep 300"})
	if !errors.Is(err, context.DeadlineExceeded) || !res.Interrupted {
		t.Fatalf("exp interrupted + deadline error, got %v %+v", err, res)
	}
	expectOut(t, s, "echo ok", "ok\n")
}

// A background job still writing to a command's stdout after its result
// was taken: its late output lands in that command's file, never in a
// later command's.
func TestLateOutputNeverMixesCommands(t *testing.T) {
	m := newManager(t)
	s := mustCreate(t, m, CreateRequest{ID: "late"})
	first := run(t, s, "(sleep 0.5; echo late) &")
	for i := 0; i < 5; i++ {
		if res := run(t, s, "true"); len(res.Stdout.Data) != 0 {
			t.Fatalf("command %s got output %q", res.CommandID, res.Stdout.Data)
		}
	}
	waitFor(t, "the late output", 5*time.Second, func() bool {
		b, _ := s.ReadOutput(first.CommandID, Stdout, 0, 100)
		return string(b) == "late\n"
	})
	for _, ci := range s.History()[1:] {
		b, err := s.ReadOutput(ci.ID, Stdout, 0, 100)
		if err != nil || len(b) != 0 {
			t.Fatalf("command %s: exp empty output, got %q %v", ci.ID, b, err)
		}
		if got, _ := s.Command(ci.ID); got.OutputPruned {
			t.Fatalf("command %s: a recent empty output reads as pruned", ci.ID)
		}
	}
}

// The shell opens a command's output files without truncating them only
// when their preparation knows them empty: a file left by an earlier life
// is left as it is and reported not clean (the shell then truncates it).
// A command's output never starts with bytes it did not write.
func TestPrepareLeavesNoStaleBytes(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "c"), 0o755); err != nil {
		t.Fatal(err)
	}
	next := filesFor(dir, "3")
	if !prepareOutputs(next) {
		t.Fatal("fresh files reported not clean")
	}
	for _, p := range []string{next.stdout, next.stderr} {
		if b, err := os.ReadFile(p); err != nil || len(b) != 0 {
			t.Fatalf("%s: exp an empty file, got %q %v", p, b, err)
		}
	}
	// A leftover with bytes in it: left alone, not clean.
	left := filesFor(dir, "4")
	if err := os.WriteFile(left.stderr, []byte("old life\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if prepareOutputs(left) {
		t.Fatal("a file with bytes in it reported clean")
	}
	if b, _ := os.ReadFile(left.stderr); string(b) != "old life\n" {
		t.Fatalf("preparing changed an existing file: %q", b)
	}

	// Through a session: leftovers at the files of its next commands.
	m := newManager(t)
	s := mustCreate(t, m, CreateRequest{ID: "stale"})
	run(t, s, "true")
	for id := 4; id <= 7; id++ { // 2 and 3 are prepared already
		f := filesFor(s.dir, fmt.Sprint(id))
		for _, p := range []string{f.stdout, f.stderr} {
			if err := os.WriteFile(p, []byte("stale bytes of an earlier life\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := 0; i < 6; i++ {
		res := run(t, s, "echo hi; echo err >&2")
		if string(res.Stdout.Data) != "hi\n" || string(res.Stderr.Data) != "err\n" {
			t.Fatalf("command %s: stdout %q stderr %q", res.CommandID, res.Stdout.Data, res.Stderr.Data)
		}
	}
}

// 7. A foreground command that ignores SIGINT (and so looks like a
// background job) is still killed after the grace, by a timeout or by
// Signal, without replacing the shell; a background job of an earlier
// command keeps running.
func TestStopKillsForegroundIgnoringINT(t *testing.T) {
	m := newManager(t)
	s := mustCreate(t, m, CreateRequest{ID: "ignint"})
	bg := strings.TrimSpace(out(t, s, "sleep 301 >/dev/null 2>&1 & echo $!"))
	dir := t.TempDir()
	run(t, s, "cd "+dir+"; export KEEP=kept")
	// Start times have a resolution of 10 ms: keep the job clear of the
	// commands below.
	time.Sleep(50 * time.Millisecond)
	const cmd = `bash -c 'trap "" INT; echo $$; exec sleep 300'; echo next`
	check := func(t *testing.T, res ExecResult) {
		t.Helper()
		if res.ShellReplaced || res.Ended || strings.Contains(string(res.Stdout.Data), "next") {
			t.Fatalf("exp the command stopped in the same shell, got %+v", res)
		}
		fg := strings.TrimSpace(string(res.Stdout.Data))
		waitFor(t, "the foreground sleep to be gone", 5*time.Second, func() bool { return !alive(fg) })
		if !alive(bg) {
			t.Fatalf("the earlier background job %s was killed", bg)
		}
		expectOut(t, s, `echo "$PWD $KEEP"`, dir+" kept\n")
	}
	t.Run("timeout", func(t *testing.T) {
		res := runReq(t, s, ExecRequest{Command: cmd, Timeout: 200 * time.Millisecond})
		if !res.TimedOut {
			t.Fatalf("exp timed out, got %+v", res)
		}
		check(t, res)
	})
	t.Run("signal", func(t *testing.T) {
		ctx := context.Background()
		id, err := s.Start(ctx, ExecRequest{Command: cmd})
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the command to print its pid", 5*time.Second, func() bool {
			b, err := s.ReadOutput(id, Stdout, 0, 64)
			return err == nil && strings.HasSuffix(string(b), "\n")
		})
		if err := s.Signal(ctx, id, syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		res, err := s.Wait(ctx, id)
		if err != nil || !res.Interrupted {
			t.Fatalf("exp interrupted, got %+v %v", res, err)
		}
		check(t, res)
	})
}
