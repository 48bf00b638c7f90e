package daggerws

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/patina-dev/patina/sidecar/client"
	"github.com/patina-dev/patina/tests"
)

// TestMergeDiverged merges a workspace into a branch that moved since it
// was created (a real merge commit), then deletes it keeping its branch.
func TestMergeDiverged(t *testing.T) {
	_, c := startSidecar(t)
	repo := tests.GitRepo(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = repo
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, b)
		}
		return strings.TrimSpace(string(b))
	}
	git("branch", "release")

	out := must(t, "Create")(Create(testContext(t), c, CreateRequest{Name: "side", Repo: repo, Base: "release"}))
	if !strings.Contains(out, "base:     release (") {
		t.Errorf("Create: exp base release, got:\n%s", out)
	}
	must(t, "Exec")(Exec(testContext(t), c, ExecRequest{Workspace: "side", Command: "echo A > a.txt"}))
	// Reviewed, then committed: the commit records what the diff showed.
	must(t, "Diff")(Diff(testContext(t), c, DiffRequest{Workspace: "side"}))
	must(t, "Commit")(Commit(testContext(t), c, CommitRequest{Workspace: "side", Message: "change a"}))

	// release moves on meanwhile.
	git("checkout", "-q", "release")
	if err := writeFile(repo+"/b.txt", "B\n"); err != nil {
		t.Fatal(err)
	}
	git("commit", "-q", "-am", "change b")
	git("checkout", "-q", "main")
	before := git("rev-parse", "release")

	out = must(t, "Merge")(Merge(testContext(t), c, MergeRequest{Workspace: "side"}))
	if !strings.HasPrefix(out, "merged ") || !strings.Contains(out, " into release: ") || !strings.Contains(out, "(was "+before[:12]+")") {
		t.Errorf("Merge: exp a merge into release (was %s), got %q", before[:12], out)
	}
	if got := git("show", "release:a.txt") + git("show", "release:b.txt"); got != "AB" {
		t.Errorf("release after the merge: exp a.txt=A, b.txt=B, got %q", got)
	}

	out = must(t, "Delete")(Delete(testContext(t), c, DeleteRequest{Workspace: "side", KeepBranch: true}))
	if out != "deleted workspace side (its branch is kept)\n" {
		t.Errorf("Delete: exp the branch kept, got %q", out)
	}
	git("rev-parse", "--verify", "patina/side")

	_, err := Diff(testContext(t), c, DiffRequest{Workspace: "side"})
	if !errorsIs(err, client.ErrNotFound) {
		t.Errorf("Diff after Delete: exp not found, got %v", err)
	}
}
