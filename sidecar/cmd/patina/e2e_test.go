package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/patina-dev/patina/internal/syncbuf"
	"github.com/patina-dev/patina/sidecar/client"
	"github.com/patina-dev/patina/tests"
)

// The end-to-end tests run the real binary: `patina serve` on port 0 with
// a temporary state directory, and the client commands against it, finding
// it through the state directory alone. They need Docker and the default
// image (built when missing); under -short they are skipped.

// e2eSidecar is a running `patina serve` child.
type e2eSidecar struct {
	t        *testing.T
	bin      string
	stateDir string
	cmd      *exec.Cmd
	exited   chan error
	logs     *syncbuf.Buffer
	banner   string
}

// startServe runs `patina serve --addr 127.0.0.1:0 --state-dir DIR` (no
// token: the sidecar generates one) and waits for its one-line banner.
func startServe(t *testing.T) *e2eSidecar {
	t.Helper()
	return startServeIn(t, t.TempDir(), nil)
}

// startServeWith is startServe with more environment and flags.
func startServeWith(t *testing.T, env []string, args ...string) *e2eSidecar {
	t.Helper()
	return startServeIn(t, t.TempDir(), env, args...)
}

// startServeIn is startServeWith on a given state directory (a sidecar
// started again after another one was killed, say).
func startServeIn(t *testing.T, stateDir string, env []string, args ...string) *e2eSidecar {
	t.Helper()
	tests.RequireDocker(t)
	s := &e2eSidecar{t: t, bin: tests.Binary(t), stateDir: stateDir, exited: make(chan error, 1), logs: &syncbuf.Buffer{}}
	s.cmd = exec.Command(s.bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--state-dir", s.stateDir, "--log-level", "debug"}, args...)...)
	s.cmd.Env = append(cleanEnviron(), env...)
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start patina serve: %v", err)
	}
	banner := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			s.logs.WriteString(line + "\n")
			if strings.HasPrefix(line, "patina ") && strings.Contains(line, " listening on ") {
				banner <- line
			}
		}
	}()
	go func() { s.exited <- s.cmd.Wait() }()
	t.Cleanup(s.cleanup)
	select {
	case s.banner = <-banner:
	case err := <-s.exited:
		t.Fatalf("patina serve exited: %v\n%s", err, s.logs.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("patina serve printed no banner within 60 s:\n%s", s.logs.String())
	}
	return s
}

// cleanEnviron is the test's environment without PATINA_* variables.
func cleanEnviron() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PATINA_") {
			env = append(env, kv)
		}
	}
	return env
}

// patina runs the binary as a client of this sidecar and returns its
// stdout, stderr and exit status.
func (s *e2eSidecar) patina(args ...string) cliResult {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.bin, args...)
	cmd.Env = append(cleanEnviron(), envStateDir+"="+s.stateDir)
	return runCmd(s.t, cmd, "patina", args)
}

// runCmd runs cmd and returns its stdout, stderr and exit status; the test
// fails when it cannot run at all (name and args say which in the message).
func runCmd(t testing.TB, cmd *exec.Cmd, name string, args []string) cliResult {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	code := 0
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return cliResult{stdout: out.String(), stderr: errb.String(), code: code}
}

// skipUnlessRoot skips a test under -short and when not run as root,
// saying why in short and root.
func skipUnlessRoot(t testing.TB, short, root string) {
	t.Helper()
	if testing.Short() {
		t.Skip(short)
	}
	if os.Geteuid() != 0 {
		t.Skip(root)
	}
}

// ok runs patina and fails the test unless it exits 0.
func (s *e2eSidecar) ok(args ...string) string {
	s.t.Helper()
	r := s.patina(args...)
	if r.code != 0 {
		s.t.Fatalf("patina %v: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// stop sends SIGTERM and returns serve's exit error.
func (s *e2eSidecar) stop() error {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.exited:
		s.exited <- err
		return err
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		return errors.New("patina serve did not stop within 30 s of SIGTERM")
	}
}

// cleanup removes every workspace (through the CLI), then stops serve.
func (s *e2eSidecar) cleanup() {
	if r := s.patina("ws", "ls", "--json"); r.code == 0 {
		var wss []client.Workspace
		if json.Unmarshal([]byte(r.stdout), &wss) == nil {
			for _, w := range wss {
				s.patina("ws", "rm", w.ID)
			}
		}
	}
	_ = s.stop()
	if s.t.Failed() {
		s.t.Logf("patina serve logs:\n%s", s.logs.String())
	}
}

func TestE2EServeAndExec(t *testing.T) {
	s := startServe(t)
	if !strings.Contains(s.banner, "listening on http://127.0.0.1:") || !strings.Contains(s.banner, "(state "+s.stateDir+")") {
		t.Errorf("unexpected banner %q", s.banner)
	}
	fi, err := os.Stat(filepath.Join(s.stateDir, tokenFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("exp a generated token file with mode 0600, got %v, %v", fi, err)
	}
	var ws client.Workspace
	if err := json.Unmarshal([]byte(s.ok("ws", "create", "--name", "e2e", "--env", "GREETING=hello", "--json")), &ws); err != nil {
		t.Fatalf("ws create --json: %v", err)
	}
	if ws.Name != "e2e" || ws.Status != client.StatusRunning || ws.Env["GREETING"] != "hello" {
		t.Errorf("unexpected workspace %+v", ws)
	}

	// Neither serve nor the agent sets GODEBUG for the shells.
	if r := s.patina("exec", "e2e", "--", "env | grep -c -e ^GODEBUG= || true"); r.stdout != "0\n" {
		t.Errorf("exp no GODEBUG in a session, got %q (exit %d, %q)", r.stdout, r.code, r.stderr)
	}

	r := s.patina("exec", "e2e", "--", "echo hi; exit 3")
	if r.code != 3 || r.stdout != "hi\n" {
		t.Errorf("exp stdout %q and exit 3, got %q and %d (stderr %q)", "hi\n", r.stdout, r.code, r.stderr)
	}

	// Another session: state persists between commands, streams are
	// separate, and the environment is the container's.
	s.ok("exec", "e2e", "--session", "s1", "--", "cd /tmp && export X=42")
	r = s.patina("exec", "e2e", "--session", "s1", "--", `echo "$PWD $X $GREETING"; echo to-stderr >&2`)
	if r.code != 0 || r.stdout != "/tmp 42 hello\n" || r.stderr != "to-stderr\n" {
		t.Errorf("exp %q / %q, got %q / %q (exit %d)", "/tmp 42 hello\n", "to-stderr\n", r.stdout, r.stderr, r.code)
	}
	r = s.patina("exec", "e2e", "--session", "s1", "--timeout", "300ms", "--", "sleep 30")
	if r.code != 124 || !strings.Contains(r.stderr, "patina: command timed out after 300ms") {
		t.Errorf("exp a timeout (exit 124), got %d, %q", r.code, r.stderr)
	}
	cmd := exec.Command(s.bin, "exec", "e2e", "--session", "s1", "--stdin", "--", "tr a-z A-Z")
	cmd.Env = append(cleanEnviron(), envStateDir+"="+s.stateDir)
	cmd.Stdin = strings.NewReader("shout\n")
	if out, err := cmd.Output(); err != nil || string(out) != "SHOUT\n" {
		t.Errorf("exp SHOUT from --stdin, got %q, %v", out, err)
	}

	var wss []client.Workspace
	if err := json.Unmarshal([]byte(s.ok("ws", "ls", "--json")), &wss); err != nil {
		t.Fatalf("ws ls --json: %v", err)
	}
	if len(wss) != 1 || wss[0].ID != ws.ID {
		t.Errorf("exp [e2e], got %+v", wss)
	}
	if out := s.ok("ws", "ls"); !strings.Contains(out, "NAME") || !strings.Contains(out, "e2e") {
		t.Errorf("unexpected ws ls table:\n%s", out)
	}
	if out := s.ok("sessions", "e2e"); !strings.Contains(out, "s1") || !strings.Contains(out, "/tmp") {
		t.Errorf("unexpected sessions table:\n%s", out)
	}
	if out := s.ok("history", "e2e", "--session", "s1"); !strings.Contains(out, "sleep 30") || !strings.Contains(out, "timeout") {
		t.Errorf("unexpected history table:\n%s", out)
	}

	if out := s.ok("ws", "rm", "e2e"); out != "removed workspace e2e\n" {
		t.Errorf("unexpected ws rm output %q", out)
	}
	if out := s.ok("ws", "ls", "--json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("exp no workspaces left, got %s", out)
	}
	if r := s.patina("ws", "show", "e2e"); r.code != exitFailure || !strings.HasPrefix(r.stderr, "patina: ") {
		t.Errorf("exp exit 1 for a removed workspace, got %d, %q", r.code, r.stderr)
	}

	// SIGTERM: serve exits 0 and removes its sidecar.json; then the CLI
	// says the sidecar is not running.
	if err := s.stop(); err != nil {
		t.Fatalf("patina serve on SIGTERM: %v\n%s", err, s.logs.String())
	}
	if _, err := os.Stat(filepath.Join(s.stateDir, discoveryFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("exp sidecar.json removed on shutdown, got %v", err)
	}
	r = s.patina("ws", "ls")
	if r.code != exitFailure || !strings.Contains(r.stderr, "patina serve") {
		t.Errorf("exp exit 1 with a hint to start the sidecar, got %d, %q", r.code, r.stderr)
	}
}

func TestE2ERepoWorkspace(t *testing.T) {
	s := startServe(t)
	repo := tests.GitRepo(t, map[string]string{"README": "hello\n"})
	s.ok("ws", "create", "--name", "feature", "--repo", repo)
	s.ok("exec", "feature", "--", "echo world >> README && echo new > NEW")

	if out := s.ok("ws", "diff", "feature", "--stat"); !strings.Contains(out, "README") || !strings.Contains(out, "2 files changed, 2 insertions(+), 0 deletions(-)") {
		t.Errorf("unexpected diff --stat:\n%s", out)
	}
	if out := s.ok("ws", "diff", "feature"); !strings.Contains(out, "+world") {
		t.Errorf("unexpected diff:\n%s", out)
	}
	if out := s.ok("ws", "commit", "feature", "-m", "Add world", "--author", "Ada <ada@example.com>"); !strings.HasPrefix(out, "committed ") {
		t.Errorf("unexpected commit output %q", out)
	}
	if out := s.ok("ws", "commit", "feature", "-m", "again"); !strings.HasPrefix(out, "nothing to commit: the workspace is at ") {
		t.Errorf("unexpected second commit output %q", out)
	}
	// A branch that does not exist: the message names the workspace and
	// the repository, not the workspace's id or the sidecar's packages.
	r := s.patina("ws", "merge", "feature", "--into", "nosuch")
	if r.code != exitFailure || !strings.HasPrefix(r.stderr, "patina: merge feature: "+repo+` has no branch "nosuch" to merge into.`) ||
		strings.Contains(r.stderr, "worktree:") {
		t.Errorf("unexpected merge --into nosuch: %d, %q", r.code, r.stderr)
	}
	if out := s.ok("ws", "merge", "feature"); !strings.Contains(out, "main") {
		t.Errorf("unexpected merge output %q", out)
	}
	b, err := os.ReadFile(filepath.Join(repo, "README"))
	if err != nil {
		t.Fatal(err)
	}
	// merge updates the branch, not the user's checkout; git show does.
	show := exec.Command("git", "show", "main:README")
	show.Dir = repo
	if out, err := show.Output(); err != nil || string(out) != "hello\nworld\n" {
		t.Errorf("exp main's README to be merged, got %q, %v (worktree has %q)", out, err, b)
	}
	if out := s.ok("ws", "log", "feature"); !strings.Contains(out, "committed") {
		t.Errorf("unexpected log:\n%s", out)
	}
	var entries []client.LogEntry
	if err := json.Unmarshal([]byte(s.ok("ws", "log", "feature", "--json")), &entries); err != nil || len(entries) == 0 {
		t.Errorf("ws log --json: %v, %d entries", err, len(entries))
	}
	// apply --json: what was staged in the user's working tree.
	s.ok("exec", "feature", "--", "echo more >> README")
	var applied client.ApplyResult
	if err := json.Unmarshal([]byte(s.ok("ws", "apply", "feature", "--json")), &applied); err != nil {
		t.Fatalf("ws apply --json: %v", err)
	}
	if applied.Dir != repo || len(applied.Files) != 1 || applied.Files[0].Path != "README" {
		t.Errorf("unexpected ws apply --json: %+v", applied)
	}
	// A scratch workspace has no git: a clear error, exit 1.
	s.ok("ws", "create", "--name", "scratch")
	if r := s.patina("ws", "diff", "scratch"); r.code != exitFailure || !strings.HasPrefix(r.stderr, "patina: ") {
		t.Errorf("exp exit 1 for diff of a scratch workspace, got %d, %q", r.code, r.stderr)
	}
}

// TestE2EExecWords runs commands given as one argument (text) and as
// several (words) in a real session.
func TestE2EExecWords(t *testing.T) {
	s := startServe(t)
	s.ok("ws", "create", "--name", "words")
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string
	}{
		{"exit status of sh -c", []string{"sh", "-c", "exit 7"}, 7, ""},
		{"bash -c keeps its script whole", []string{"bash", "-c", "echo a b"}, 0, "a b\n"},
		{"spaces kept", []string{"echo", "a   b"}, 0, "a   b\n"},
		{"quotes kept", []string{"printf", "%s|", "it's", "", "$HOME"}, 0, "it's||$HOME|"},
		{"one argument is text", []string{"cd /tmp && pwd | tr a-z A-Z"}, 0, "/TMP\n"},
		{"safe words stay bash words", []string{"cd", "/usr"}, 0, ""},
		{"the cd persisted", []string{"pwd"}, 0, "/usr\n"},
		{"an alias", []string{"alias hi='echo hello'"}, 0, ""},
		{"the alias as a word", []string{"hi", "there"}, 0, "hello there\n"},
		{"an assignment", []string{"X=a b", "printenv", "X"}, 0, "a b\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.patina(append([]string{"exec", "words", "--"}, tt.args...)...)
			if r.code != tt.code || r.stdout != tt.stdout {
				t.Errorf("exp exit %d and %q, got %d and %q (stderr %q)", tt.code, tt.stdout, r.code, r.stdout, r.stderr)
			}
		})
	}
}

// TestE2EExecAfterExit: a command that ends the session's shell exits with
// its status; the next command in that session runs in a new shell, with a
// note on stderr, in "default" and in a named session alike.
func TestE2EExecAfterExit(t *testing.T) {
	s := startServe(t)
	s.ok("ws", "create", "--name", "ended")
	for _, session := range []string{"default", "named"} {
		t.Run(session, func(t *testing.T) {
			s.ok("exec", "ended", "--session", session, "--", "cd /tmp && export X=1")
			r := s.patina("exec", "ended", "--session", session, "--", "exit 7")
			if r.code != 7 || !strings.Contains(r.stderr, "ended session \""+session+"\"'s shell") {
				t.Errorf("exp exit 7 and a note, got %d, %q", r.code, r.stderr)
			}
			for i := range 2 {
				r = s.patina("exec", "ended", "--session", session, "--", `echo "$PWD X=$X"`)
				if r.code != 0 || r.stdout != "/workspace X=\n" {
					t.Errorf("run %d: exp a new shell's state, got %d, %q (stderr %q)", i, r.code, r.stdout, r.stderr)
				}
				note := "patina: session \"" + session + "\"'s shell had ended, so this command runs in a new shell (state reset"
				if i == 0 && (!strings.HasPrefix(r.stderr, note) || strings.Count(r.stderr, "\n") != 1) {
					t.Errorf("exp one line %q..., got %q", note, r.stderr)
				}
				if i == 1 && r.stderr != "" {
					t.Errorf("exp no note once the new shell runs, got %q", r.stderr)
				}
			}
			// The session's history and command ids went on through the
			// new shell.
			var hist []client.Command
			if err := json.Unmarshal([]byte(s.ok("history", "ended", "--session", session, "--json")), &hist); err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, c := range hist {
				ids = append(ids, c.ID)
			}
			if strings.Join(ids, ",") != "1,2,3,4" || hist[1].Command != "exit 7" {
				t.Errorf("exp commands 1-4 with exit 7 as 2, got %+v", hist)
			}
			// --fresh still starts a new shell on purpose.
			s.ok("exec", "ended", "--session", session, "--", "cd /tmp")
			if out := s.ok("exec", "ended", "--session", session, "--fresh", "--", "pwd"); out != "/workspace\n" {
				t.Errorf("exp --fresh to start in /workspace, got %q", out)
			}
		})
	}
	// A stopped workspace: the message names the command that starts it.
	s.ok("ws", "stop", "ended")
	r := s.patina("exec", "ended", "--", "true")
	if r.code != exitFailure || !strings.Contains(r.stderr, "`patina ws start ended`") || strings.Contains(r.stderr, "/v1/") {
		t.Errorf("exp exit 1 naming patina ws start, got %d, %q", r.code, r.stderr)
	}
}

// TestE2EIdleStopShown: ws ls shows an idle-stopped workspace as idle,
// not as an error; ws show shows its idle stop; patina exec says when it
// started one again.
func TestE2EIdleStopShown(t *testing.T) {
	s := startServe(t)
	s.ok("ws", "create", "--name", "napper", "--idle-stop", "1s")
	if out := s.ok("ws", "show", "napper"); !strings.Contains(out, "Idle stop: after 1s without activity\n") {
		t.Fatalf("exp ws show to show the idle stop, got\n%s", out)
	}
	tests.WaitFor(t, "the idle stop", 60*time.Second, func() bool {
		var w client.Workspace
		r := s.patina("ws", "show", "napper", "--json")
		return r.code == 0 && json.Unmarshal([]byte(r.stdout), &w) == nil && w.IdleStopped
	})
	// Paused first where the engine pauses (Docker), then stopped.
	if out := s.ok("ws", "ls"); !strings.Contains(out, "stopped (idle, paused)") || strings.Contains(out, "(error)") {
		t.Fatalf("exp ws ls to show the workspace as idle-stopped, got\n%s", out)
	}
	r := s.patina("exec", "napper", "--", "echo awake")
	if r.code != 0 || r.stdout != "awake\n" || !strings.Contains(r.stderr, `workspace "napper" had been stopped for being idle; it was started again`) {
		t.Fatalf("exp the exec to say it resumed the workspace, got %d %q %q", r.code, r.stdout, r.stderr)
	}
	if out := s.ok("ws", "ls"); !strings.Contains(out, "running") {
		t.Fatalf("exp it running again, got\n%s", out)
	}
}

// TestE2EExecSurvivesSidecarKill: the sidecar is kill -9'ed while patina
// exec streams a command: patina waits for a sidecar to come back on the
// same state directory, prints the rest of the output and exits with the
// command's real status.
func TestE2EExecSurvivesSidecarKill(t *testing.T) {
	s := startServe(t)
	s.ok("ws", "create", "--name", "survivor")
	var stdout, stderr syncbuf.Buffer
	cmd := exec.Command(s.bin, "exec", "survivor", "--", "echo before; sleep 4; echo after; echo err >&2; (exit 3)")
	cmd.Env = append(cleanEnviron(), envStateDir+"="+s.stateDir)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tests.WaitFor(t, "the command's first output", 30*time.Second, func() bool { return stdout.String() == "before\n" })
	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	err := <-s.exited
	s.exited <- err
	startServeIn(t, s.stateDir, nil)
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("patina exec did not finish; stderr %q", stderr.String())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("exp exit 3, got %v; stderr %q", err, stderr.String())
	}
	if got := stdout.String(); got != "before\nafter\n" {
		t.Errorf("exp the whole output once, got %q", got)
	}
	if e := stderr.String(); !strings.Contains(e, "lost the connection to the sidecar during command 1") || !strings.HasSuffix(e, "err\n") || strings.Contains(e, "unexpected EOF\n") {
		t.Errorf("exp a note on the lost connection, then the command's stderr, got %q", e)
	}
}
