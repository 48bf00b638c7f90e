package tests

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/patina-dev/patina/sidecar/client"
)

// cliResult is one run of the patina CLI.
type cliResult struct {
	code           int
	stdout, stderr string
}

// cliRun runs `patina args...` against h, with more environment and stdin
// (nil: /dev/null).
func (h *Harness) cliRun(env []string, stdin io.Reader, args ...string) cliResult {
	h.t.Helper()
	cmd := exec.Command(h.Bin, args...)
	cmd.Env = append(append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "PATINA_") || strings.HasPrefix(kv, "TERM=")
	}), "PATINA_STATE_DIR="+h.StateDir, "PATINA_TOKEN="+h.Token), env...)
	cmd.Stdin = stdin
	return runCmd(h.t, cmd, args)
}

// runCmd runs cmd, a run of `patina args...`, and returns what it printed
// and its exit status; t fails when it cannot run at all.
func runCmd(t testing.TB, cmd *exec.Cmd, args []string) cliResult {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("patina %v: %v", args, err)
	}
	return cliResult{code: code, stdout: out.String(), stderr: errb.String()}
}

// Issue 26 items 8, 9, 11, 12, 15 and 16: what a user of the CLI and the
// API meets around the core flows.
func TestUserMeets(t *testing.T) {
	h := Start(t)
	ws := h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "meets"})

	t.Run("scratch ids are uuids", func(t *testing.T) {
		if _, err := uuid.Parse(ws.ID); err != nil || len(ws.ID) != 36 {
			t.Fatalf("exp a uuid for a scratch workspace, got %q", ws.ID)
		}
		if r := h.cliRun(nil, nil, "ws", "show", ws.ID); r.code != 0 || !strings.Contains(r.stdout, "meets") {
			t.Fatalf("ws show by id: %+v", r)
		}
	})

	t.Run("timeout exits 124", func(t *testing.T) {
		r := h.cliRun(nil, nil, "exec", "meets", "--timeout", "300ms", "--", "sleep 30")
		if r.code != 124 || !strings.Contains(r.stderr, "timed out after 300ms") {
			t.Fatalf("exp exit 124 and the timeout named, got %d %q", r.code, r.stderr)
		}
		if r := h.cliRun(nil, nil, "exec", "--help"); !strings.Contains(r.stdout, "124") {
			t.Fatalf("exec --help does not name 124:\n%s", r.stdout)
		}
	})

	t.Run("exec --tty passes TERM", func(t *testing.T) {
		r := h.cliRun([]string{"TERM=screen-256color"}, nil, "exec", "meets", "--tty", "--", `echo "$TERM"; tput colors`)
		if r.code != 0 || r.stdout != "screen-256color\r\n256\r\n" {
			t.Fatalf("exp the client's TERM, got %d %q %q", r.code, r.stdout, r.stderr)
		}
		r = h.cliRun(nil, nil, "exec", "meets", "--tty", "--", `echo "$TERM"`)
		if r.code != 0 || r.stdout != "xterm-256color\r\n" {
			t.Fatalf("exp xterm-256color without TERM, got %d %q %q", r.code, r.stdout, r.stderr)
		}
		// Through the API too, and a TERM that is no terminal type is refused.
		res := h.ExecReq("meets", "default", client.ExecRequest{Command: `echo "$TERM"`, TTY: true})
		if res.Stdout != "xterm-256color\r\n" {
			t.Fatalf("API tty: exp xterm-256color, got %q", res.Stdout)
		}
		code, body := h.Raw("POST", "/v1/workspaces/meets/sessions/default/exec", "", []byte(`{"command":"true","tty":true,"term":"x'; rm -rf /"}`), nil)
		if code != http.StatusBadRequest || !strings.Contains(string(body), "term must be") {
			t.Fatalf("a hostile term: exp 400, got %d %s", code, body)
		}
	})

	t.Run("help", func(t *testing.T) {
		if r := h.cliRun(nil, nil, "exec", "--help"); !strings.Contains(r.stdout, "[--fresh] [--tty]") {
			t.Errorf("exec --help usage lacks --fresh and --tty:\n%s", r.stdout)
		}
		if r := h.cliRun(nil, nil, "ws", "fork", "--help"); !strings.Contains(r.stdout, "fork SRC [--name DST]") {
			t.Errorf("ws fork --help shows --name as required:\n%s", r.stdout)
		}
		for _, args := range [][]string{{"--help"}, {"ws", "--help"}} {
			r := h.cliRun(nil, nil, args...)
			if strings.Contains(r.stdout, "worktree") || !strings.Contains(r.stdout, "of its own") {
				t.Errorf("%v describes an old workspace:\n%s", args, r.stdout)
			}
		}
		if r := h.cliRun(nil, nil, "--help"); !strings.Contains(r.stdout, "completion") {
			t.Errorf("completion is hidden:\n%s", r.stdout)
		}
		if r := h.cliRun(nil, nil, "completion", "bash"); r.code != 0 || !strings.Contains(r.stdout, "__start_patina") {
			t.Errorf("completion bash: %d %q", r.code, r.stderr)
		}
		r := h.cliRun(nil, nil, "__complete", "exec", "")
		if !strings.Contains(r.stdout, "meets\n") || !strings.Contains(r.stdout, ":4\n") { // 4: no file completion
			t.Errorf("exec completes no workspace names: %q", r.stdout)
		}
		h.CreateSession("meets", client.CreateSessionRequest{ID: "build"})
		r = h.cliRun(nil, nil, "__complete", "exec", "meets", "--session", "")
		if !strings.Contains(r.stdout, "build\n") || !strings.Contains(r.stdout, "default\n") {
			t.Errorf("--session completes no session names: %q", r.stdout)
		}
	})

	repo := GitRepo(t, map[string]string{"a.txt": "a\n"})
	t.Run("diff lines", func(t *testing.T) {
		h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "meets-r", Repo: repo})
		h.Out("meets-r", "default", "echo b >> a.txt && git commit -qam b")
		for _, args := range [][]string{{"ws", "diff", "meets-r"}, {"ws", "diff", "meets-r", "--stat"}} {
			r := h.cliRun(nil, nil, args...)
			if r.code != 0 || strings.Contains(r.stderr, "patina:") || !strings.Contains(r.stderr, "this is commit ") {
				t.Errorf("%v: exp the commit line without patina:, got %d %q", args, r.code, r.stderr)
			}
		}
	})

	t.Run("messages", func(t *testing.T) {
		// Each says its thing once, in the user's terms.
		clean := func(what, msg string) {
			t.Helper()
			for _, bad := range []string{"invalid request:", "not found:", "already exists:", "worktree:", "openat", "statat", "busy running another command"} {
				if strings.Contains(msg, bad) {
					t.Errorf("%s: %q holds %q", what, msg, bad)
				}
			}
		}
		r := h.cliRun(nil, nil, "ws", "create", "--name", "nope", "--repo", "/nonexistent")
		clean("repo", r.stderr)
		if r.code != 1 || !strings.Contains(r.stderr, "/nonexistent") || !strings.Contains(r.stderr, "no git repository") {
			t.Errorf("repo: %d %q", r.code, r.stderr)
		}
		r = h.cliRun(nil, nil, "ws", "show", "nope")
		clean("show", r.stderr)
		apiMsg := func(method, path, body string) (int, string) {
			t.Helper()
			code, b := h.Raw(method, path, "", []byte(body), nil)
			var eb client.ErrorBody
			if err := json.Unmarshal(b, &eb); err != nil {
				t.Fatalf("%s %s: not JSON: %s", method, path, b)
			}
			return code, eb.Error
		}
		code, msg := apiMsg("POST", "/v1/workspaces/meets/ports", `{"port":99999}`)
		clean("port", msg)
		if code != 400 || !strings.Contains(msg, "port must be between 1 and 65535") {
			t.Errorf("port: %d %q", code, msg)
		}
		code, msg = apiMsg("POST", "/v1/workspaces/meets/sessions", `{"id":"build"}`)
		clean("session exists", msg)
		if code != 409 || !strings.Contains(msg, "session build exists already") {
			t.Errorf("session exists: %d %q", code, msg)
		}
		code, msg = apiMsg("POST", "/v1/workspaces/meets/sessions/default/exec", `{"command":"true","timeout_ms":-1}`)
		if code != 400 || !strings.Contains(msg, "292 years") {
			t.Errorf("timeout bound: %d %q", code, msg)
		}
		code, msg = apiMsg("GET", "/v1/workspaces/meets/files/no/such.txt", "")
		clean("file", msg)
		if code != 404 || !strings.Contains(msg, "/workspace/no/such.txt") {
			t.Errorf("file 404: %d %q", code, msg)
		}
		if _, err := h.Client.Start(t.Context(), "meets", "build", client.ExecRequest{Command: "sleep 30"}); err != nil {
			t.Fatal(err)
		}
		r = h.cliRun(nil, nil, "exec", "meets", "--session", "build", "--", "true")
		clean("busy", r.stderr)
		if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "is running command") {
			t.Errorf("busy: %d %q", r.code, r.stderr)
		}
		h.Out("meets", "default", "(/.patina/bin/patina agent test-server --listen 127.0.0.1:8000 >/dev/null 2>&1 &); "+
			"for i in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/8000) 2>/dev/null && break; sleep 0.1; done")
		if r := h.cliRun(nil, nil, "ws", "port", "meets", "8000"); r.code != 0 {
			t.Fatalf("port: %+v", r)
		}
		r = h.cliRun(nil, nil, "ws", "port", "meets", "8000", "--host-port", "1")
		clean("re-forward", r.stderr)
		if r.code != 1 || strings.Contains(r.stderr, "DELETE") || !strings.Contains(r.stderr, "patina ws port meets 8000 --close") {
			t.Errorf("re-forward: %d %q", r.code, r.stderr)
		}
		// 270 MB: the JSON 413 naming the limit.
		req, _ := http.NewRequest("PUT", h.Client.Addr()+"/v1/workspaces/meets/files/big.bin", io.LimitReader(zeros{}, 270<<20))
		req.Header.Set("Authorization", "Bearer "+h.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("upload: %v", err)
		}
		var eb client.ErrorBody
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 413 || json.Unmarshal(b, &eb) != nil || eb.Code != "too_large" || !strings.Contains(eb.Error, "limit of") {
			t.Errorf("270 MB upload: %d %s", resp.StatusCode, b)
		}
	})

	t.Run("attach", func(t *testing.T) {
		r := h.cliRun(nil, nil, "attach", "meets")
		if r.code == 0 || !strings.Contains(r.stderr, "needs a terminal") {
			t.Fatalf("attach </dev/null: exp refused, got %d %q", r.code, r.stderr)
		}
	})

	t.Run("stop and debug log", func(t *testing.T) {
		r := h.cliRun(nil, nil, "ws", "stop", "meets-r")
		if r.code != 0 || r.stdout != "stopped workspace meets-r\n" {
			t.Errorf("ws stop: %d %q", r.code, r.stdout)
		}
		WaitFor(t, "a debug line per request", 10*time.Second, func() bool {
			return strings.Contains(h.Logs(), `method=POST path=/v1/workspaces/meets-r/stop status=200`)
		})
	})
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }
