package main

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/patina-dev/patina/sidecar/client"
)

func TestExecStreamsAndExits(t *testing.T) {
	f := newFakeSidecar(t)
	f.exec = func(w http.ResponseWriter, r *http.Request, req client.ExecRequest) {
		writeSSE(w, "stdout", client.StreamEvent{Data: "hi\n"})
		writeSSE(w, "stderr", client.StreamEvent{Data: "oops\n"})
		writeSSE(w, "stdout", client.StreamEvent{DataBase64: "AP8K"}) // 0x00 0xff \n
		writeSSE(w, "exit", client.StreamEvent{Result: &client.ExecResult{ExitCode: 3}})
	}
	r := runCLI(t, f.env(), "", "exec", "demo", "--", "echo hi; exit 3")
	if r.code != 3 {
		t.Fatalf("exp exit 3, got %d (stderr %q)", r.code, r.stderr)
	}
	if exp := "hi\n\x00\xff\n"; r.stdout != exp {
		t.Errorf("exp stdout %q, got %q", exp, r.stdout)
	}
	if r.stderr != "oops\n" {
		t.Errorf("exp stderr %q, got %q", "oops\n", r.stderr)
	}
	req := f.lastExec()
	if req.Command != "echo hi; exit 3" || req.Stdin != nil || req.StdinBase64 != "" || req.TimeoutMS != 0 {
		t.Errorf("unexpected request %+v", req)
	}
	if calls := f.callList(); !slices.Contains(calls, "POST /v1/workspaces/demo/sessions/default/exec") {
		t.Errorf("exp an exec in session default, got %v", calls)
	}
}

func TestCommandText(t *testing.T) {
	tests := []struct {
		name string
		args []string
		exp  string
	}{
		{"one argument is text", []string{"cd /tmp && pwd | cat"}, "cd /tmp && pwd | cat"},
		{"one argument with quotes", []string{`echo "a   b"`}, `echo "a   b"`},
		{"safe words", []string{"cd", "/tmp"}, "cd /tmp"},
		{"all safe characters", []string{"ls", "-la", "a_b@c%d+e=f:g,h./-"}, "ls -la a_b@c%d+e=f:g,h./-"},
		{"word with a space", []string{"sh", "-c", "exit 7"}, "sh -c 'exit 7'"},
		{"spaces kept", []string{"echo", "a   b"}, "echo 'a   b'"},
		{"single quote", []string{"echo", "it's"}, `echo 'it'\''s'`},
		{"empty word", []string{"printf", "%s|", ""}, "printf '%s|' ''"},
		{"metacharacters", []string{"echo", "$HOME", "*", "a;b", "~", "!x", "`id`", "a\nb"},
			"echo '$HOME' '*' 'a;b' '~' '!x' '`id`' 'a\nb'"},
		{"operators are words", []string{"true", "&&", "echo"}, "true '&&' echo"},
		{"assignment", []string{"X=a b", "env"}, "X='a b' env"},
		{"safe assignment", []string{"X=1", "env"}, "X=1 env"},
		{"not an assignment", []string{"echo", "1X=a b"}, "echo '1X=a b'"},
		{"non-ASCII", []string{"echo", "héllo"}, "echo 'héllo'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := commandText(tt.args); got != tt.exp {
				t.Errorf("exp %q, got %q", tt.exp, got)
			}
		})
	}
}

func TestExecWords(t *testing.T) {
	f := newFakeSidecar(t)
	r := runCLI(t, f.env(), "", "exec", "demo", "--", "sh", "-c", "exit 7")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if exp, got := "sh -c 'exit 7'", f.lastExec().Command; got != exp {
		t.Errorf("exp command %q, got %q", exp, got)
	}
}

func TestExecWithoutDash(t *testing.T) {
	f := newFakeSidecar(t)
	r := runCLI(t, f.env(), "", "exec", "demo", "true")
	if r.code != 0 || f.lastExec().Command != "true" {
		t.Errorf("exp exit 0 and command true, got %d, %q (%s)", r.code, f.lastExec().Command, r.stderr)
	}
}

func TestExecOutcomes(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		result client.ExecResult
		code   int
		stderr []string
	}{
		{"success", nil, client.ExecResult{}, 0, nil},
		{"timeout", []string{"--timeout", "2s"}, client.ExecResult{ExitCode: 130, TimedOut: true}, 124,
			[]string{"patina: command timed out after 2s"}},
		{"timeout killed", []string{"--timeout", "2s"}, client.ExecResult{ExitCode: 137, TimedOut: true}, 124,
			[]string{"timed out"}},
		{"interrupted", nil, client.ExecResult{ExitCode: 130, Interrupted: true}, 130, []string{"interrupted"}},
		{"session ended", nil, client.ExecResult{ExitCode: 3, SessionEnded: true}, 3,
			[]string{`ended session "default"'s shell`}},
		{"shell replaced", nil, client.ExecResult{ExitCode: 137, TimedOut: true, ShellReplaced: true, Notice: "shell replaced; state restored"}, 124,
			[]string{"patina: shell replaced; state restored"}},
		{"unknown status", nil, client.ExecResult{ExitCode: -1}, 1, []string{"exit status is unknown"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeSidecar(t)
			f.exec = func(w http.ResponseWriter, r *http.Request, req client.ExecRequest) {
				res := tt.result
				writeSSE(w, "exit", client.StreamEvent{Result: &res})
			}
			args := append(append([]string{"exec", "demo"}, tt.args...), "--", "cmd")
			r := runCLI(t, f.env(), "", args...)
			if r.code != tt.code {
				t.Errorf("exp exit %d, got %d (stderr %q)", tt.code, r.code, r.stderr)
			}
			for _, exp := range tt.stderr {
				if !strings.Contains(r.stderr, exp) {
					t.Errorf("exp stderr to contain %q, got %q", exp, r.stderr)
				}
			}
			if len(tt.stderr) == 0 && r.stderr != "" {
				t.Errorf("exp no stderr, got %q", r.stderr)
			}
		})
	}
}

func TestExecTimeoutRequest(t *testing.T) {
	f := newFakeSidecar(t)
	runCLI(t, f.env(), "", "exec", "demo", "--timeout", "1m30s", "--", "make")
	if got := f.lastExec().TimeoutMS; got != 90000 {
		t.Errorf("exp timeout_ms 90000, got %d", got)
	}
}

func TestExecStdin(t *testing.T) {
	f := newFakeSidecar(t)
	r := runCLI(t, f.env(), "line 1\nline 2\n", "exec", "demo", "--stdin", "--", "cat")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if req := f.lastExec(); req.Stdin == nil || *req.Stdin != "line 1\nline 2\n" || req.StdinBase64 != "" {
		t.Errorf("exp stdin as text, got %+v", req)
	}
	runCLI(t, f.env(), "\x00\xff", "exec", "demo", "--stdin", "--", "cat")
	if req := f.lastExec(); req.Stdin != nil || req.StdinBase64 != "AP8=" {
		t.Errorf("exp stdin as base64 AP8=, got %+v", req)
	}
	runCLI(t, f.env(), "ignored", "exec", "demo", "--", "cat")
	if req := f.lastExec(); req.Stdin != nil || req.StdinBase64 != "" {
		t.Errorf("exp no stdin without --stdin, got %+v", req)
	}
}

func TestExecCreatesNamedSession(t *testing.T) {
	f := newFakeSidecar(t)
	r := runCLI(t, f.env(), "", "exec", "demo", "--session", "build", "--", "make")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	exp := []string{
		"POST /v1/workspaces/demo/sessions/build/exec",
		"POST /v1/workspaces/demo/sessions",
		"POST /v1/workspaces/demo/sessions/build/exec",
	}
	if got := f.callList(); !slices.Equal(got, exp) {
		t.Errorf("exp calls %v, got %v", exp, got)
	}
	// A missing workspace stays an error (exit 1), and no session is made.
	r = runCLI(t, f.env(), "", "exec", "nope", "--session", "build", "--", "make")
	if r.code != 1 || !strings.Contains(r.stderr, `patina: no workspace "nope"`) {
		t.Errorf("exp exit 1 and not found, got %d, %q", r.code, r.stderr)
	}
}

func TestExecFresh(t *testing.T) {
	f := newFakeSidecar(t)
	r := runCLI(t, f.env(), "", "exec", "demo", "--fresh", "--", "true")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	exp := []string{"DELETE /v1/workspaces/demo/sessions/default", "POST /v1/workspaces/demo/sessions/default/exec"}
	if got := f.callList(); !slices.Equal(got, exp) {
		t.Errorf("exp calls %v, got %v", exp, got)
	}
}

// TestExecEndedSession: when an earlier command ended the session's shell,
// exec removes the session, makes it again if it is not "default", runs the
// command in the new shell and says so on stderr.
func TestExecEndedSession(t *testing.T) {
	for _, tt := range []struct {
		session string
		calls   []string
	}{
		{"default", []string{
			"POST /v1/workspaces/demo/sessions/default/exec",
			"POST /v1/workspaces/demo/sessions/default/restart",
			"POST /v1/workspaces/demo/sessions/default/exec",
		}},
		{"build", []string{
			"POST /v1/workspaces/demo/sessions/build/exec",
			"POST /v1/workspaces/demo/sessions/build/restart",
			"POST /v1/workspaces/demo/sessions/build/exec",
		}},
	} {
		t.Run(tt.session, func(t *testing.T) {
			f := newFakeSidecar(t)
			f.sessions[tt.session] = true
			ended := true
			f.exec = func(w http.ResponseWriter, r *http.Request, req client.ExecRequest) {
				if ended {
					ended = false
					writeFakeError(w, http.StatusConflict, client.CodeEnded, "session has ended: command 1 ended the shell; use --fresh")
					return
				}
				writeSSE(w, "stdout", client.StreamEvent{Data: "/workspace\n"})
				writeSSE(w, "exit", client.StreamEvent{Result: &client.ExecResult{ExitCode: 4}})
			}
			r := runCLI(t, f.env(), "", "exec", "demo", "--session", tt.session, "--", "pwd")
			if r.code != 4 || r.stdout != "/workspace\n" {
				t.Errorf("exp exit 4 and the new shell's output, got %d, %q (stderr %q)", r.code, r.stdout, r.stderr)
			}
			if got := f.callList(); !slices.Equal(got, tt.calls) {
				t.Errorf("exp calls %v, got %v", tt.calls, got)
			}
			exp := `patina: session "` + tt.session + `"'s shell had ended, so this command runs in a new shell (state reset:`
			if !strings.HasPrefix(r.stderr, exp) || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("exp one line starting %q, got %q", exp, r.stderr)
			}
		})
	}
}

func TestExecStopped(t *testing.T) {
	f := newFakeSidecar(t)
	f.workspaces[0].Status, f.workspaces[0].Error = "stopped", "the container was removed"
	f.exec = func(w http.ResponseWriter, r *http.Request, req client.ExecRequest) {
		writeFakeError(w, http.StatusConflict, client.CodeStopped,
			"workspace demo is stopped because the container was removed; POST /v1/workspaces/demo/start (or `patina ws start demo`) starts it again")
	}
	r := runCLI(t, f.env(), "", "exec", "demo", "--", "true")
	exp := "patina: workspace demo is stopped (the container was removed).\n" +
		"Start it again with `patina ws start demo`: its files and its sessions' state are kept.\n"
	if r.code != exitFailure || r.stderr != exp {
		t.Errorf("exp exit 1 and\n%s\ngot %d and\n%s", exp, r.code, r.stderr)
	}
}

func TestExecAPIErrors(t *testing.T) {
	tests := []struct {
		code, msg string
		status    int
		exp       []string
	}{
		// The sidecar's message names the next step; the CLI adds no other.
		{client.CodeBusy, "session default is running command 3: wait for it, signal it, or use another session", http.StatusConflict,
			[]string{"patina: session default is running command 3: wait for it, signal it, or use another session\n"}},
		{client.CodeInternal, "boom", http.StatusInternalServerError, []string{"patina: boom\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			f := newFakeSidecar(t)
			f.exec = func(w http.ResponseWriter, r *http.Request, req client.ExecRequest) {
				w.Header().Set("Content-Type", "application/json")
				writeFakeError(w, tt.status, tt.code, tt.msg)
			}
			r := runCLI(t, f.env(), "", "exec", "demo", "--", "true")
			if r.code != exitFailure {
				t.Errorf("exp exit 1, got %d", r.code)
			}
			for _, exp := range tt.exp {
				if !strings.Contains(r.stderr, exp) {
					t.Errorf("exp stderr to contain %q, got %q", exp, r.stderr)
				}
			}
		})
	}
}

// TestExecInterrupt cancels patina's context (as Ctrl-C does) while the
// command runs: the request is cancelled, so the sidecar stops the command,
// and patina exits 130.
func TestExecInterrupt(t *testing.T) {
	f := newFakeSidecar(t)
	cancelled := make(chan struct{})
	f.exec = func(w http.ResponseWriter, r *http.Request, req client.ExecRequest) {
		writeSSE(w, "stdout", client.StreamEvent{Data: "started\n"})
		select {
		case <-r.Context().Done():
			close(cancelled)
		case <-time.After(10 * time.Second):
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb bytes.Buffer
	started := &notifyWriter{w: &out, ch: make(chan struct{})}
	a := &app{
		stdin: strings.NewReader(""), stdout: started, stderr: &errb,
		getenv:     func(k string) string { return f.env()[k] },
		now:        time.Now,
		apiTimeout: 10 * time.Second,
	}
	done := make(chan int)
	go func() { done <- run(ctx, []string{"exec", "demo", "--", "sleep 100"}, a) }()
	select {
	case <-started.ch:
	case <-time.After(10 * time.Second):
		t.Fatal("no output arrived")
	}
	cancel()
	select {
	case code := <-done:
		if code != exitInterrupted {
			t.Errorf("exp exit 130, got %d (stderr %q)", code, errb.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("patina did not return after the interrupt")
	}
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Error("the sidecar never saw the request cancelled")
	}
	if out.String() != "started\n" || !strings.Contains(errb.String(), "interrupted") {
		t.Errorf("unexpected output %q / %q", out.String(), errb.String())
	}
}

// notifyWriter closes ch on the first write.
type notifyWriter struct {
	w    *bytes.Buffer
	ch   chan struct{}
	once bool
}

func (n *notifyWriter) Write(p []byte) (int, error) {
	k, err := n.w.Write(p)
	if !n.once {
		n.once = true
		close(n.ch)
	}
	return k, err
}
