package tests

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/patina-dev/patina/sidecar/client"
)

// waitSnapshot is shell text that waits (10 s at most) until session sid
// has a state snapshot, reading the agent's session directory as any root
// process in the workspace can.
func waitSnapshot(sid string) string {
	return `for i in $(seq 200); do grep -q '"snapshot"' /.patina/state/sessions/` + sid + `/session.json && break; sleep 0.05; done; `
}

// A session's shell killed by something other than its own command
// (another session's kill -9 -1, which kills the agent too; a kill of its
// shell from another session) comes back from its state snapshot on its
// next exec, the result saying so; its command ids go on. kill -9 $$ in
// the session itself still ends it.
func TestSessionKilledFromOutsideComesBack(t *testing.T) {
	h := Start(t)
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "ko"})
	for _, tc := range []struct{ name, kill string }{
		{"kill -9 -1 in another session", "kill -9 -1; sleep 0.3"},
		{"its shell killed from another session", `p=$(sed -n 's/.*"shell_pid": *\([0-9]*\).*/\1/p' /.patina/state/sessions/victim/session.json); kill -9 $p; for i in $(seq 200); do kill -0 $p 2>/dev/null || break; sleep 0.01; done`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			_ = h.Client.DeleteSession(ctx, "ko", "victim")
			h.CreateSession("ko", client.CreateSessionRequest{ID: "victim"})
			h.Out("ko", "victim", "cd /tmp; export V=kept; f() { echo fn; }")
			if res := h.Exec("ko", "default", waitSnapshot("victim")+tc.kill+"; echo killed"); res.Stdout != "killed\n" {
				t.Fatalf("the killer: %+v", res)
			}
			res := h.Exec("ko", "victim", `echo "$PWD $V $(f)"`)
			if res.ExitCode != 0 || res.Stdout != "/tmp kept fn\n" {
				t.Fatalf("exp the victim's state back, got %+v", res)
			}
			if !res.ShellReplaced || !strings.Contains(res.Notice, "killed from outside") || !strings.Contains(res.Notice, "after command 1") {
				t.Fatalf("exp the result to say the shell was replaced, got %+v", res)
			}
			if res.CommandID != "2" {
				t.Fatalf("exp command 2, got %s", res.CommandID)
			}
			if res := h.Exec("ko", "victim", "echo again"); res.ShellReplaced || res.Notice != "" || res.CommandID != "3" {
				t.Fatalf("exp a plain command 3, got %+v", res)
			}
		})
	}
	// Its own kill -9 $$ ends it, as documented.
	res := h.Exec("ko", "victim", "kill -9 $$")
	if !res.SessionEnded {
		t.Fatalf("exp kill -9 $$ to end the session: %+v", res)
	}
	_, err := h.Client.Exec(context.Background(), "ko", "victim", client.ExecRequest{Command: "true"})
	if !errors.Is(err, client.ErrEnded) {
		t.Fatalf("exp 409 ended after kill -9 $$, got %v", err)
	}
}

// A session's command ids stay unique and its history is kept through a
// new shell: after exit 4 as command 6, a restart's next command is 7.
func TestSessionIDsSurviveANewShell(t *testing.T) {
	h := Start(t)
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "ids"})
	ctx := context.Background()
	for range 5 {
		h.Out("ids", "default", "export N=1")
	}
	if res := h.Exec("ids", "default", "exit 4"); !res.SessionEnded || res.CommandID != "6" {
		t.Fatalf("exp command 6 to end the shell: %+v", res)
	}
	s, err := h.Client.RestartSession(ctx, "ids", "default")
	if err != nil || s.Status != "idle" || s.Commands != 6 {
		t.Fatalf("restart: %+v %v", s, err)
	}
	res := h.Exec("ids", "default", `echo "$PWD ${N-unset}"`)
	if res.CommandID != "7" || res.Stdout != "/workspace unset\n" {
		t.Fatalf("exp command 7 in a reset shell, got %+v", res)
	}
	hist, err := h.Client.History(ctx, "ids", "default")
	if err != nil || len(hist) != 7 || hist[5].ID != "6" || hist[5].Command != "exit 4" || !hist[5].SessionEnded {
		t.Fatalf("exp the whole history, got %+v %v", hist, err)
	}
	// Restarting a live session leaves it as it is.
	if _, err := h.Client.RestartSession(ctx, "ids", "default"); err != nil {
		t.Fatal(err)
	}
	if res := h.Exec("ids", "default", "echo x"); res.CommandID != "8" {
		t.Fatalf("exp command 8, got %+v", res)
	}
}

// A fork keeps its source's merge target: merged without --into, its work
// goes into the branch the source came from. A conflict's advice names
// refs the repository has.
func TestForkKeepsMergeTarget(t *testing.T) {
	h := Start(t)
	ctx := context.Background()
	repo := GitRepo(t, map[string]string{"a.txt": "a\n"})
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "origin", Repo: repo})
	h.Out("origin", "default", "echo src > src.txt && git add src.txt && git commit -qm 'in the source'")
	fk, err := h.Client.ForkWorkspace(ctx, "origin", client.ForkWorkspaceRequest{Name: "offshoot"})
	if err != nil {
		t.Fatal(err)
	}
	if fk.Base != "refs/heads/main" {
		t.Fatalf("exp the fork's base to be main, got %q", fk.Base)
	}
	h.Out("offshoot", "default", "echo fork > a.txt && git commit -qam 'in the fork'")
	if _, err := h.Client.Diff(ctx, "offshoot"); err != nil {
		t.Fatal(err)
	}
	res, err := h.Client.Merge(ctx, "offshoot", client.MergeRequest{})
	if err != nil || res.Into != "refs/heads/main" {
		t.Fatalf("exp the fork to merge into main, got %+v %v", res, err)
	}
	if got := gitOut(t, repo, "show", "main:a.txt"); got != "fork\n" {
		t.Fatalf("exp main to have the fork's a.txt, got %q", got)
	}

	// The source's own change to a.txt now conflicts with main.
	h.Out("origin", "default", "echo source > a.txt && git commit -qam 'clash'")
	if _, err := h.Client.Diff(ctx, "origin"); err != nil {
		t.Fatal(err)
	}
	_, err = h.Client.Merge(ctx, "origin", client.MergeRequest{})
	if !errors.Is(err, client.ErrConflict) || !strings.Contains(err.Error(), "git switch main && git merge patina/origin") {
		t.Fatalf("exp a conflict whose advice names main and patina/origin, got %v", err)
	}
	gitOut(t, repo, "rev-parse", "--verify", "refs/heads/patina/origin")
}

// gitOut runs git in dir and returns its stdout, failing the test on error.
func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return string(out)
}

// A workspace whose own repository was broken from inside (its branch
// deleted and objects pruned; .git removed) still gives its files' changes
// back: diff re-seeds the repository at the base and says so; commit and
// merge then work.
func TestBrokenWorkspaceRepoIsReseeded(t *testing.T) {
	h := Start(t)
	ctx := context.Background()
	repo := GitRepo(t, map[string]string{"a.txt": "a\n"})
	for _, tc := range []struct{ name, breakIt string }{
		{"branch deleted, objects pruned", "git update-ref -d refs/heads/patina/broken1 && git reflog expire --expire=now --all && git gc -q --prune=now"},
		{"rm -rf .git", "rm -rf .git"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "broken1"
			if tc.breakIt == "rm -rf .git" {
				name = "broken2"
			}
			h.CreateWorkspace(client.CreateWorkspaceRequest{Name: name, Repo: repo})
			h.Out(name, "default", "echo work > a.txt && echo more > b.txt && git add -A && git commit -qm inner && echo later >> b.txt")
			h.Out(name, "default", tc.breakIt+"; true")
			if _, err := h.Client.GetWorkspace(ctx, name); err != nil {
				t.Fatal(err)
			}
			d, err := h.Client.Diff(ctx, name)
			if err != nil {
				t.Fatalf("diff of a broken repository: %v", err)
			}
			if !strings.Contains(d.Repaired, "made again at the base commit") || !d.Uncommitted || len(d.Files) != 2 || !strings.Contains(d.Text, "+work") || !strings.Contains(d.Text, "+later") {
				t.Fatalf("exp the files' changes back, said so, got %+v", d)
			}
			cr, err := h.Client.Commit(ctx, name, client.CommitRequest{Message: "rescued"})
			if err != nil || !cr.Committed || cr.Repaired != "" {
				t.Fatalf("commit after the repair: %+v %v", cr, err)
			}
			if _, err := h.Client.Diff(ctx, name); err != nil {
				t.Fatal(err)
			}
			mr, err := h.Client.Merge(ctx, name, client.MergeRequest{Into: "main"})
			if err != nil || mr.Merged != cr.Commit {
				t.Fatalf("merge after the repair: %+v %v", mr, err)
			}
			if got := gitOut(t, repo, "show", "main:b.txt"); got != "more\nlater\n" {
				t.Fatalf("exp main to have the rescued b.txt, got %q", got)
			}
			gitOut(t, repo, "reset", "-q", "--hard", "HEAD~1") // the next case starts from the base again
		})
	}
}
