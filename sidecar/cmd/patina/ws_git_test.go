package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/patina-dev/patina/sidecar/client"
)

// TestMergeNoBranch: merging into a branch that does not exist names the
// workspace and the repository, not the workspace's id and the sidecar's
// internal prefixes.
func TestMergeNoBranch(t *testing.T) {
	f := newFakeSidecar(t)
	r := runCLI(t, f.env(), "", "ws", "merge", "demo", "--into", "nosuch")
	exp := "patina: merge demo: /home/me/repo has no branch \"nosuch\" to merge into.\n" +
		"Name a local branch of that repository with --into, or leave --into out to merge into the branch it was created from, main.\n"
	if r.code != exitFailure || r.stderr != exp {
		t.Errorf("exp exit 1 and\n%s\ngot %d and\n%s", exp, r.code, r.stderr)
	}
	// A missing workspace keeps the sidecar's message.
	r = runCLI(t, f.env(), "", "ws", "merge", "nope", "--into", "nosuch")
	if r.code != exitFailure || r.stderr != "patina: no workspace \"nope\"\n" {
		t.Errorf("exp exit 1 and not found, got %d, %q", r.code, r.stderr)
	}
	r = runCLI(t, f.env(), "", "ws", "merge", "demo", "--commit", "bbbb")
	if r.code != 0 || r.stdout != "merged bbbb: fast-forwarded main: aaaa..bbbb\n" {
		t.Errorf("exp a fast-forward naming the commit merged, got %d, %q (stderr %q)", r.code, r.stdout, r.stderr)
	}
}

// TestMergeRefused: a merge the sidecar refuses because the workspace
// changed since the diff says so, as the sidecar does, and exits 1.
func TestMergeRefused(t *testing.T) {
	f := newFakeSidecar(t)
	r := runCLI(t, f.env(), "", "ws", "merge", "demo")
	exp := "patina: workspace demo changed since you reviewed it at 1111111111 (it is at 2222222222 now): look at the diff again (patina ws diff demo) and merge\n"
	if r.code != exitFailure || r.stderr != exp || r.stdout != "" {
		t.Errorf("exp exit 1 and\n%s\ngot %d and\n%s(stdout %q)", exp, r.code, r.stderr, r.stdout)
	}
}

// TestDiffAndCommitNameTheCommit: diff (text or --stat) and commit print
// the commit they show, and how to merge it.
func TestDiffAndCommitNameTheCommit(t *testing.T) {
	f := newFakeSidecar(t)
	head := strings.Repeat("3f1c9e2a07", 4)
	f.diff = client.Diff{Commit: head, Text: "+x\n", Files: []client.FileStat{{Path: "x", Status: "added", Added: 1}}}
	for _, args := range [][]string{{"ws", "diff", "demo"}, {"ws", "diff", "demo", "--stat"}} {
		r := runCLI(t, f.env(), "", args...)
		if r.code != 0 || r.stderr != "this is commit 3f1c9e2a07; patina ws merge demo merges exactly it\n" {
			t.Errorf("%v: exp the commit named, got %d, %q", args, r.code, r.stderr)
		}
	}
	f.diff.Uncommitted = true
	r := runCLI(t, f.env(), "", "ws", "diff", "demo")
	if r.code != 0 || !strings.HasPrefix(r.stderr, "this is commit 3f1c9e2a07 plus uncommitted work") ||
		!strings.Contains(r.stderr, "patina ws commit demo -m MESSAGE") {
		t.Errorf("exp the uncommitted work named, got %d, %q", r.code, r.stderr)
	}
	r = runCLI(t, f.env(), "", "ws", "diff", "demo", "--json")
	if r.code != 0 || r.stderr != "" || !strings.Contains(r.stdout, `"commit": "`+head+`"`) {
		t.Errorf("--json: exp the commit in the JSON and nothing on stderr, got %q, %q", r.stdout, r.stderr)
	}

	f.commit = client.CommitResult{Commit: head, Committed: true, Reviewed: true}
	r = runCLI(t, f.env(), "", "ws", "commit", "demo", "-m", "m")
	if r.code != 0 || r.stdout != "committed 3f1c9e2a07\n" || r.stderr != "" {
		t.Errorf("commit: %d, %q, %q", r.code, r.stdout, r.stderr)
	}
	f.commit = client.CommitResult{Commit: head}
	r = runCLI(t, f.env(), "", "ws", "commit", "demo", "-m", "m")
	if r.code != 0 || r.stdout != "nothing to commit: the workspace is at 3f1c9e2a07\n" ||
		r.stderr != "note: 3f1c9e2a07 is not what patina ws diff last showed; look at it (patina ws diff demo) before merging\n" {
		t.Errorf("commit not reviewed: %d, %q, %q", r.code, r.stdout, r.stderr)
	}
}

func TestApply(t *testing.T) {
	f := newFakeSidecar(t)
	r := runCLI(t, f.env(), "", "ws", "apply", "demo")
	exp := "staged in /home/me/repo:\nSTATUS     PATH     LINES\nmodified   README   +1 -0\n1 file changed, 1 insertion(+), 0 deletions(-)\n"
	if r.code != 0 || r.stdout != exp {
		t.Errorf("exp exit 0 and\n%s\ngot %d and\n%s(stderr %q)", exp, r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, f.env(), "", "ws", "apply", "demo", "--json")
	var res client.ApplyResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != 0 {
		t.Fatalf("ws apply --json: exit %d, %v: %q", r.code, err, r.stdout)
	}
	if res.Dir != "/home/me/repo" || len(res.Files) != 1 || res.Files[0].Path != "README" {
		t.Errorf("unexpected result %+v", res)
	}
}

// TestJSONWithTables checks the rule that every command printing a table
// has --json.
func TestJSONWithTables(t *testing.T) {
	root := newRootCmd(newApp())
	for _, path := range []string{"ws ls", "ws show", "ws create", "ws diff", "ws apply", "ws log", "sessions", "history", "bench"} {
		cmd, _, err := root.Find(strings.Fields(path))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if cmd.Flags().Lookup("json") == nil {
			t.Errorf("patina %s prints a table but has no --json", path)
		}
	}
}
