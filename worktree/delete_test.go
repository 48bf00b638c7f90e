package worktree

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDelete(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ctx := context.Background()
	ws := mustCreate(t, r, CreateRequest{Name: "doomed"})
	agentCommit(t, r, ws, map[string]string{"work.txt": "work\n"})
	writeFile(t, filepath.Join(ws.Path, "dirty.txt"), "uncommitted\n")
	other := mustCreate(t, r, CreateRequest{Name: "survivor"})
	user := snapshotUser(t, repo)

	if err := r.Delete(ctx, "doomed", DeleteRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ws.Path); !os.IsNotExist(err) {
		t.Fatalf("exp worktree gone, got %v", err)
	}
	if _, err := gitTry(repo, "rev-parse", "--verify", "refs/heads/patina/doomed"); err == nil {
		t.Fatalf("exp branch deleted")
	}
	for _, ref := range []string{"patina-state", "patina-log"} {
		if _, err := gitTry(repo, "notes", "--ref", ref, "show", ws.Commit); err == nil {
			t.Fatalf("exp %s note removed", ref)
		}
	}
	_, err := r.Get(ctx, "doomed")
	wantErr(t, err, ErrNotFound)
	if list, _ := r.List(ctx); len(list) != 1 || list[0].ID != other.ID {
		t.Fatalf("exp only the survivor, got %+v", list)
	}
	if n := strings.Count(gitT(t, repo, "worktree", "list", "--porcelain"), "worktree "); n != 2 {
		t.Fatalf("exp 2 worktrees, got %d", n)
	}
	wantSameUser(t, user, snapshotUser(t, repo))

	// The name is free again.
	mustCreate(t, r, CreateRequest{Name: "doomed"})
	err = r.Delete(ctx, "ghost", DeleteRequest{})
	wantErr(t, err, ErrNotFound)
}

func TestDeleteKeepBranch(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ctx := context.Background()
	ws := mustCreate(t, r, CreateRequest{Name: "keeper"})
	tip := agentCommit(t, r, ws, map[string]string{"work.txt": "work\n"})

	if err := r.Delete(ctx, "keeper", DeleteRequest{KeepBranch: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ws.Path); !os.IsNotExist(err) {
		t.Fatalf("exp worktree gone, got %v", err)
	}
	if exp, got := tip, gitT(t, repo, "rev-parse", "refs/heads/patina/keeper"); exp != got {
		t.Fatalf("exp branch kept at %s, got %s", exp, got)
	}
	if _, err := gitTry(repo, "notes", "--ref", "patina-state", "show", ws.Commit); err == nil {
		t.Fatalf("exp state note removed")
	}
	logText := gitT(t, repo, "notes", "--ref", "patina-log", "show", ws.Commit)
	if !strings.Contains(logText, " deleted: worktree removed, branch kept at "+tip) {
		t.Fatalf("exp log note kept with a deleted line, got %q", logText)
	}
	if list, _ := r.List(ctx); len(list) != 0 {
		t.Fatalf("exp no workspace listed, got %+v", list)
	}
	_, err := r.Create(ctx, CreateRequest{Name: "keeper"})
	wantErr(t, err, ErrExists)
}

func TestDeleteMissingWorktree(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ws := mustCreate(t, r, CreateRequest{Name: "vanished"})
	if err := os.RemoveAll(ws.Path); err != nil {
		t.Fatal(err)
	}
	if err := r.Delete(context.Background(), "vanished", DeleteRequest{}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(gitT(t, repo, "worktree", "list", "--porcelain"), "worktree "); n != 1 {
		t.Fatalf("exp the stale worktree forgotten, got %d worktrees", n)
	}
	if _, err := gitTry(repo, "rev-parse", "--verify", "refs/heads/patina/vanished"); err == nil {
		t.Fatalf("exp branch deleted")
	}
}
