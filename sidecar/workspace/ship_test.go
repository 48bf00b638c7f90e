package workspace

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A repository workspace on an engine that is not on this host: no host
// directory and no mount of the user's objects; the base's objects are
// shipped to a store in its state, and the round trip works as for a
// local workspace.
func TestShippedGitFlow(t *testing.T) {
	eng := newFakeEngine(t)
	eng.remote = true
	m := newManager(t, eng, t.TempDir())
	ctx := context.Background()
	repo := gitRepo(t)
	ws, err := m.Create(ctx, CreateRequest{Name: "far", Repo: repo})
	if err != nil {
		t.Fatal(err)
	}
	if ws.Worktree != "" || ws.Branch != "patina/far" {
		t.Fatalf("exp a branch and no host directory, got %+v", ws)
	}
	c := eng.container(t, ws.ID)
	if c.spec.Files != "" || len(c.spec.Mounts) != 0 {
		t.Fatalf("exp no host directory or objects mounted, got files %q mounts %+v", c.spec.Files, c.spec.Mounts)
	}
	store := filepath.Join(c.dir, "state", "base.git")
	if alt, err := os.ReadFile(filepath.Join(c.dir, "workspace", ".git", "objects", "info", "alternates")); err != nil || strings.TrimSpace(string(alt)) != filepath.Join(store, "objects") {
		t.Fatalf("exp the store as the only alternate, got %q, %v", alt, err)
	}
	out(t, m, "far", "default", "cd "+filepath.Join(c.dir, "workspace")+" && echo one > a && git add a && git commit -qm one && echo two > b")
	d, err := m.Diff(ctx, "far")
	if err != nil || len(d.Files) != 2 || !d.Uncommitted {
		t.Fatalf("diff: %+v %v", d, err)
	}
	mr, err := m.Merge(ctx, "far", MergeRequest{Commit: d.Commit})
	if err != nil || !mr.FastForward {
		t.Fatalf("merge: %+v %v", mr, err)
	}
	if got, _ := exec.Command("git", "-C", repo, "show", "main:a").Output(); string(got) != "one\n" {
		t.Fatalf("exp the workspace's file merged, got %q", got)
	}
	// A restart does not ship again: the store has the base.
	if _, err := m.Stop(ctx, "far"); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(filepath.Join(store, "objects", "pack"))
	if _, err := m.Start(ctx, "far"); err != nil {
		t.Fatal(err)
	}
	if fi2, _ := os.Stat(filepath.Join(store, "objects", "pack")); fi == nil || fi2 == nil || !fi2.ModTime().Equal(fi.ModTime()) {
		t.Fatal("exp the store left alone by a restart")
	}
	if err := m.Delete(ctx, "far", false); err != nil {
		t.Fatal(err)
	}
	if o, _ := exec.Command("git", "-C", repo, "branch", "--list", "patina/*").Output(); len(o) != 0 {
		t.Fatalf("the branch survived: %s", o)
	}
}

// The store is the workspace's: wrecked from inside, the next commit
// re-seeds the workspace's repository (shipping the base's objects again)
// and says so; the user's branches move only through checked objects, and
// a restart ships the objects again.
func TestShippedHostileAgent(t *testing.T) {
	eng := newFakeEngine(t)
	eng.remote = true
	m := newManager(t, eng, t.TempDir())
	ctx := context.Background()
	repo := gitRepo(t)
	ws, err := m.Create(ctx, CreateRequest{Name: "wreck", Repo: repo})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := exec.Command("git", "-C", repo, "for-each-ref", "refs/heads/main").Output()
	c := eng.container(t, ws.ID)
	store := filepath.Join(c.dir, "state", "base.git")
	// The workspace replaces its store with garbage and commits.
	out(t, m, "wreck", "default", "rm -rf "+store+" && mkdir -p "+store+"/objects && echo junk > "+store+"/objects/junk")
	if cr, err := m.Commit(ctx, "wreck", CommitRequest{Message: "x"}); err != nil || cr.Repaired == "" {
		t.Fatalf("exp the commit to re-seed the wrecked repository and say so, got %+v %v", cr, err)
	}
	after, _ := exec.Command("git", "-C", repo, "for-each-ref", "refs/heads/main").Output()
	if string(before) != string(after) {
		t.Fatalf("the user's branches moved:\n%s\n%s", before, after)
	}
	if _, err := m.Stop(ctx, "wreck"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Start(ctx, "wreck"); err != nil {
		t.Fatalf("exp a restart to ship the objects again, got %v", err)
	}
	out(t, m, "wreck", "default", "cd "+filepath.Join(c.dir, "workspace")+" && echo fixed > f")
	if cr, err := m.Commit(ctx, "wreck", CommitRequest{Message: "fixed"}); err != nil || !cr.Committed {
		t.Fatalf("commit after the restart: %+v %v", cr, err)
	}
}
