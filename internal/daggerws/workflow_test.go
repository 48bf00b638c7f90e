package daggerws

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/patina-dev/patina/sidecar/client"
	"github.com/patina-dev/patina/tests"
)

// TestWorkflow drives a repository workspace through every function, as
// `dagger call workspace ...` would, against a real sidecar.
func TestWorkflow(t *testing.T) {
	_, c := startSidecar(t)
	repo := tests.GitRepo(t, map[string]string{"README.md": "hello\n"})

	out := must(t, "Create")(Create(testContext(t), c, CreateRequest{Name: "glue", Repo: repo}))
	for _, exp := range []string{"name:     glue\n", "status:   running\n", "branch:   patina/glue\n", "repo:     " + repo + "\n", "base:     "} {
		if !strings.Contains(out, exp) {
			t.Errorf("Create: exp %q in the answer, got:\n%s", exp, out)
		}
	}
	if !strings.HasPrefix(out, "name:") {
		t.Errorf("Create: exp the name first, got:\n%s", out)
	}

	out = must(t, "List")(List(testContext(t), c, ListRequest{}))
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "NAME") || !strings.HasPrefix(lines[1], "glue ") ||
		!strings.Contains(lines[1], "running") || !strings.Contains(lines[1], "patina/glue") {
		t.Errorf("List: exp a header and a running glue, got:\n%s", out)
	}
	out = must(t, "List(json)")(List(testContext(t), c, ListRequest{Format: FormatJSON}))
	var wss []client.Workspace
	if err := json.Unmarshal([]byte(out), &wss); err != nil || len(wss) != 1 || wss[0].Name != "glue" {
		t.Errorf("List(json): exp one workspace glue, got %v (%v):\n%s", wss, err, out)
	}

	out = must(t, "Exec")(Exec(testContext(t), c, ExecRequest{Workspace: "glue", Command: "printf 'changed\\n' > README.md && echo new > new.txt && cat README.md"}))
	if out != "changed\n" {
		t.Errorf("Exec: exp %q, got %q", "changed\n", out)
	}

	diff := must(t, "Diff")(Diff(testContext(t), c, DiffRequest{Workspace: "glue"}))
	for _, exp := range []string{"--- a/README.md", "-hello", "+changed", "+++ b/new.txt", "+new"} {
		if !strings.Contains(diff, exp) {
			t.Errorf("Diff: exp %q, got:\n%s", exp, diff)
		}
	}
	// The diff applies to the repository as it is.
	apply := exec.Command("git", "apply", "--check", "-")
	apply.Dir = repo
	apply.Stdin = strings.NewReader(diff)
	if b, err := apply.CombinedOutput(); err != nil {
		t.Errorf("git apply --check of the diff: %v\n%s", err, b)
	}

	// What the diff showed is uncommitted: a merge records nothing, so it
	// asks for a commit first.
	if _, err := Merge(testContext(t), c, MergeRequest{Workspace: "glue"}); err == nil || !strings.Contains(err.Error(), "commit it first") {
		t.Errorf("Merge before commit: exp a refusal asking for a commit first, got %v", err)
	}

	out = must(t, "Commit")(Commit(testContext(t), c, CommitRequest{Workspace: "glue", Message: "change README, add new.txt"}))
	if !strings.HasPrefix(out, "committed ") {
		t.Errorf("Commit: exp %q, got %q", "committed <hash>", out)
	}
	commit := strings.TrimSpace(strings.TrimPrefix(out, "committed "))
	out = must(t, "Commit again")(Commit(testContext(t), c, CommitRequest{Workspace: "glue", Message: "again"}))
	if out != "nothing to commit\n" {
		t.Errorf("Commit again: exp %q, got %q", "nothing to commit\n", out)
	}

	out = must(t, "Merge")(Merge(testContext(t), c, MergeRequest{Workspace: "glue"}))
	if !strings.HasPrefix(out, "merged "+commit+": fast-forwarded main: ") || !strings.Contains(out, ".."+commit) || strings.Contains(out, "note:") {
		t.Errorf("Merge: exp a fast-forward of main to %s, got %q", commit, out)
	}
	show := exec.Command("git", "show", "main:new.txt")
	show.Dir = repo
	if b, err := show.Output(); err != nil || string(b) != "new\n" {
		t.Errorf("git show main:new.txt: exp %q, got %q (%v)", "new\n", b, err)
	}

	out = must(t, "Delete")(Delete(testContext(t), c, DeleteRequest{Workspace: "glue"}))
	if out != "deleted workspace glue\n" {
		t.Errorf("Delete: exp %q, got %q", "deleted workspace glue\n", out)
	}
	if out = must(t, "List after Delete")(List(testContext(t), c, ListRequest{})); out != "no workspaces\n" {
		t.Errorf("List after Delete: exp %q, got %q", "no workspaces\n", out)
	}
	if out = must(t, "List(json) after Delete")(List(testContext(t), c, ListRequest{Format: FormatJSON})); out != "[]\n" {
		t.Errorf("List(json) after Delete: exp %q, got %q", "[]\n", out)
	}
}
