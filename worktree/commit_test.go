package worktree

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCommit(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	// Hooks that would fail and signing that would fail: patina runs with
	// both off.
	hooks := filepath.Join(repo, ".git", "hooks")
	for _, h := range []string{"pre-commit", "commit-msg", "post-commit", "reference-transaction", "post-checkout"} {
		writeFile(t, filepath.Join(hooks, h), "#!/bin/sh\necho hook ran >&2\nexit 1\n")
		if err := os.Chmod(filepath.Join(hooks, h), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	gitT(t, repo, "config", "commit.gpgSign", "true")
	gitT(t, repo, "config", "gpg.program", "/bin/false")

	r := openRepo(t, repo)
	ctx := context.Background()
	ws := mustCreate(t, r, CreateRequest{Name: "work"})
	user := snapshotUser(t, repo)

	writeFile(t, filepath.Join(ws.Path, "new.txt"), "new\n")
	writeFile(t, filepath.Join(ws.Path, "src", "a.txt"), "changed\n")
	if err := os.Remove(filepath.Join(ws.Path, "src", "b.txt")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ws.Path, "skip.log"), "ignored\n")

	res, err := r.Commit(ctx, "work", CommitRequest{Message: "agent: change things\n\nbody"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Committed {
		t.Fatalf("exp a commit, got %+v", res)
	}
	if exp, got := res.Commit, gitT(t, repo, "rev-parse", "refs/heads/patina/work"); exp != got {
		t.Fatalf("exp branch at %s, got %s", exp, got)
	}
	if exp, got := ws.Commit, gitT(t, repo, "rev-parse", res.Commit+"^"); exp != got {
		t.Fatalf("exp parent %s, got %s", exp, got)
	}
	if exp, got := "patina <patina@localhost>|patina <patina@localhost>|agent: change things", gitT(t, repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%s", res.Commit); exp != got {
		t.Fatalf("exp %q, got %q", exp, got)
	}
	if exp, got := "A\tnew.txt\nM\tsrc/a.txt\nD\tsrc/b.txt", gitT(t, repo, "diff-tree", "-r", "--name-status", "--no-commit-id", res.Commit); exp != got {
		t.Fatalf("exp committed changes %q, got %q", exp, got)
	}
	if exp, got := "", gitT(t, ws.Path, "status", "--porcelain"); exp != got {
		t.Fatalf("exp a clean worktree after commit, got %q", got)
	}
	if _, err := os.Stat(filepath.Join(ws.Path, "skip.log")); err != nil {
		t.Fatalf("ignored file should stay in the worktree: %v", err)
	}
	if sig := gitT(t, repo, "log", "-1", "--format=%G?", res.Commit); sig != "N" {
		t.Fatalf("exp an unsigned commit, got %q", sig)
	}
	events, err := r.Log(ctx, "work")
	if err != nil {
		t.Fatal(err)
	}
	last := events[len(events)-1]
	if last.Kind != EventCommitted || last.Message != res.Commit+" agent: change things" {
		t.Fatalf("exp a committed event, got %+v", last)
	}
	if exp, got := res.Commit, mustGet(t, r, "work").Head; exp != got {
		t.Fatalf("exp head %s, got %s", exp, got)
	}
	wantSameUser(t, user, snapshotUser(t, repo))

	// Nothing more to commit: a no-op.
	again, err := r.Commit(ctx, "work", CommitRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if again.Committed || again.Commit != res.Commit {
		t.Fatalf("exp no-op at %s, got %+v", res.Commit, again)
	}
}

func TestCommitAuthorAndDefaultMessage(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ctx := context.Background()
	ws := mustCreate(t, r, CreateRequest{Name: "authored"})
	writeFile(t, filepath.Join(ws.Path, "x.txt"), "x\n")
	res, err := r.Commit(ctx, "authored", CommitRequest{Author: &Signature{Name: "Ada Agent", Email: "ada@example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	if exp, got := "Ada Agent <ada@example.com>|patina <patina@localhost>|patina: changes in workspace authored", gitT(t, repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%s", res.Commit); exp != got {
		t.Fatalf("exp %q, got %q", exp, got)
	}
	_, err = r.Commit(ctx, "authored", CommitRequest{Author: &Signature{Name: "Evil\nName", Email: "e"}})
	wantErr(t, err, ErrInvalidName)
}

func TestCommitRefusesOffBranch(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ws := mustCreate(t, r, CreateRequest{Name: "wander"})
	gitT(t, ws.Path, "checkout", "-q", "--detach")
	writeFile(t, filepath.Join(ws.Path, "x.txt"), "x\n")
	_, err := r.Commit(context.Background(), "wander", CommitRequest{})
	wantErr(t, err, ErrConflict)
	if !strings.Contains(err.Error(), "detached HEAD") {
		t.Fatalf("exp the message to say where the worktree is, got %q", err)
	}
}
