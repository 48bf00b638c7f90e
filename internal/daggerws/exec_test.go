package daggerws

import (
	"errors"
	"strings"
	"testing"

	"github.com/patina-dev/patina/sidecar/client"
)

// TestExec runs commands in a scratch workspace of a real sidecar: output,
// failures, --allow-failure, timeouts, sessions, long output.
func TestExec(t *testing.T) {
	_, c := startSidecar(t)
	out := must(t, "Create")(Create(testContext(t), c, CreateRequest{Name: "runs"}))
	if !strings.HasPrefix(out, "name:") || !strings.Contains(strings.SplitN(out, "\n", 2)[0], " runs") || strings.Contains(out, "branch:") {
		t.Errorf("Create (scratch): exp the name and no branch, got:\n%s", out)
	}
	exec := func(req ExecRequest) (string, error) {
		req.Workspace = "runs"
		return Exec(testContext(t), c, req)
	}
	// (exit 3) fails the command line; a bare exit would end the shell.
	failing := "echo out; echo err >&2; (exit 3)"

	t.Run("stdout", func(t *testing.T) {
		if out := must(t, "Exec")(exec(ExecRequest{Command: "echo out; echo err >&2"})); out != "out\n" {
			t.Errorf("exp stdout only, %q, got %q", "out\n", out)
		}
	})

	t.Run("failure", func(t *testing.T) {
		out, err := exec(ExecRequest{Command: failing})
		var ee *ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("exp an *ExitError, got %q, %v", out, err)
		}
		if ee.ExitCode != 3 || ee.Stderr != "err\n" || ee.Stdout != "out\n" || ee.Session != DefaultSession || ee.TimedOut {
			t.Errorf("exp exit 3, stderr %q, stdout %q in session default, got %+v", "err\n", "out\n", *ee)
		}
		for _, exp := range []string{"exit code 3", "stderr:\nerr", "stdout:\nout", "command: " + failing} {
			if !strings.Contains(err.Error(), exp) {
				t.Errorf("exp %q in the message, got:\n%s", exp, err)
			}
		}
	})

	t.Run("allow failure", func(t *testing.T) {
		if out := must(t, "Exec")(exec(ExecRequest{Command: failing, AllowFailure: true})); out != "out\n" {
			t.Errorf("exp %q, got %q", "out\n", out)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		out, err := exec(ExecRequest{Command: "echo started; sleep 30", TimeoutMS: 300, Session: "slow"})
		var ee *ExitError
		if !errors.As(err, &ee) || !ee.TimedOut || ee.Stdout != "started\n" {
			t.Fatalf("exp a timed-out *ExitError with stdout %q, got %q, %v", "started\n", out, err)
		}
		if !strings.Contains(err.Error(), "timed out after 300 ms") {
			t.Errorf("exp the timeout in the message, got:\n%s", err)
		}
	})

	t.Run("sessions persist and are created on first use", func(t *testing.T) {
		must(t, "cd")(exec(ExecRequest{Command: "cd /tmp && export X=kept", Session: "other"}))
		if out := must(t, "pwd")(exec(ExecRequest{Command: "pwd; echo $X", Session: "other"})); out != "/tmp\nkept\n" {
			t.Errorf("session other: exp %q, got %q", "/tmp\nkept\n", out)
		}
		if out := must(t, "pwd")(exec(ExecRequest{Command: "pwd; echo \"[$X]\""})); out != "/workspace\n[]\n" {
			t.Errorf("session default: exp %q, got %q", "/workspace\n[]\n", out)
		}
	})

	t.Run("a command that ends the shell, and --fresh", func(t *testing.T) {
		_, err := exec(ExecRequest{Command: "echo bye; exit 4", Session: "doomed"})
		var ee *ExitError
		if !errors.As(err, &ee) || ee.ExitCode != 4 || !ee.SessionEnded || !strings.Contains(err.Error(), "pass --fresh") {
			t.Fatalf("exp an *ExitError with exit 4, the session ended and a hint, got %v", err)
		}
		_, err = exec(ExecRequest{Command: "true", Session: "doomed"})
		if !errors.Is(err, client.ErrEnded) || !strings.Contains(err.Error(), "pass --fresh") {
			t.Errorf("exp ended with a hint, got %v", err)
		}
		if out := must(t, "Exec --fresh")(exec(ExecRequest{Command: "echo again", Session: "doomed", Fresh: true})); out != "again\n" {
			t.Errorf("exp %q, got %q", "again\n", out)
		}
		// --fresh on a session that does not exist yet.
		if out := must(t, "Exec --fresh")(exec(ExecRequest{Command: "echo new", Session: "brand-new", Fresh: true})); out != "new\n" {
			t.Errorf("exp %q, got %q", "new\n", out)
		}
	})

	t.Run("long stdout comes back whole", func(t *testing.T) {
		// Over the sidecar's head+tail limit (2 x 1 MiB), so it is read back.
		const n = 3_000_000
		out := must(t, "Exec")(exec(ExecRequest{Command: "head -c 3000000 /dev/zero | tr '\\0' x; echo end"}))
		if len(out) != n+4 || strings.Trim(out[:n], "x") != "" || !strings.HasSuffix(out, "end\n") {
			t.Errorf("exp %d bytes of x then %q, got %d bytes ending %q", n, "end\n", len(out), out[max(0, len(out)-20):])
		}
	})

	t.Run("unknown workspace", func(t *testing.T) {
		for _, session := range []string{"", "other"} {
			_, err := Exec(testContext(t), c, ExecRequest{Workspace: "nope", Session: session, Command: "true"})
			if !errors.Is(err, client.ErrNotFound) || !strings.Contains(err.Error(), `no workspace "nope"`) {
				t.Errorf("session %q: exp not found with a hint, got %v", session, err)
			}
		}
	})

	t.Run("no git in a scratch workspace", func(t *testing.T) {
		_, err := Diff(testContext(t), c, DiffRequest{Workspace: "runs"})
		if !errors.Is(err, client.ErrNoRepository) || !strings.Contains(err.Error(), "created without --repo") {
			t.Errorf("Diff: exp no_repository with a hint, got %v", err)
		}
	})

	t.Run("wrong token", func(t *testing.T) {
		bad, err := Connect(c.Addr(), "not-the-token")
		if err != nil {
			t.Fatal(err)
		}
		_, err = List(testContext(t), bad, ListRequest{})
		if !errors.Is(err, client.ErrUnauthorized) || !strings.Contains(err.Error(), "--token env:PATINA_TOKEN") {
			t.Errorf("exp unauthorized with a hint, got %v", err)
		}
	})

	t.Run("name taken", func(t *testing.T) {
		_, err := Create(testContext(t), c, CreateRequest{Name: "runs"})
		if !errors.Is(err, client.ErrConflict) || !strings.HasPrefix(err.Error(), `create workspace "runs": `) {
			t.Errorf("exp a conflict naming the workspace, got %v", err)
		}
	})
}
