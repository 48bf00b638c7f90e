package worktree

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRepairVanishedWorktree(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ctx := context.Background()
	ws := mustCreate(t, r, CreateRequest{Name: "phoenix"})
	tip := agentCommit(t, r, ws, map[string]string{"saved.txt": "committed before the loss\n"})
	writeFile(t, filepath.Join(ws.Path, "lost.txt"), "uncommitted\n")
	if err := os.RemoveAll(ws.Path); err != nil {
		t.Fatal(err)
	}

	got := mustGet(t, r, "phoenix")
	if !got.Missing {
		t.Fatalf("exp the workspace reported missing, got %+v", got)
	}
	// A fresh Repo value (restarted sidecar) sees the same.
	if !mustGet(t, openRepo(t, repo), "phoenix").Missing {
		t.Fatalf("exp missing after reload too")
	}
	_, err := r.Diff(ctx, "phoenix")
	wantErr(t, err, ErrMissing)
	_, err = r.Commit(ctx, "phoenix", CommitRequest{})
	wantErr(t, err, ErrMissing)

	fixed, err := r.Repair(ctx, "phoenix")
	if err != nil {
		t.Fatal(err)
	}
	if fixed.Missing || fixed.Path != ws.Path || fixed.Head != tip {
		t.Fatalf("exp repaired at %s on %s, got %+v", ws.Path, tip, fixed)
	}
	if exp, got := "committed before the loss\n", readFile(t, filepath.Join(ws.Path, "saved.txt")); exp != got {
		t.Fatalf("exp committed work back, got %q", got)
	}
	if exp, got := "refs/heads/patina/phoenix", gitT(t, ws.Path, "symbolic-ref", "HEAD"); exp != got {
		t.Fatalf("exp worktree on %s, got %s", exp, got)
	}
	if n := strings.Count(gitT(t, repo, "worktree", "list", "--porcelain"), "worktree "); n != 2 {
		t.Fatalf("exp 2 worktrees after repair, got %d", n)
	}
	if mustGet(t, r, "phoenix").Missing {
		t.Fatalf("exp not missing after repair")
	}
	events, _ := r.Log(ctx, "phoenix")
	if last := events[len(events)-1]; last.Kind != EventRepaired {
		t.Fatalf("exp a repaired event, got %+v", last)
	}

	// Repairing a healthy workspace changes nothing.
	again, err := r.Repair(ctx, "phoenix")
	if err != nil || again.Path != ws.Path {
		t.Fatalf("exp no-op, got %+v, %v", again, err)
	}
}

func TestRepairDeletedBranch(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ws := mustCreate(t, r, CreateRequest{Name: "nobranch"})
	if err := os.RemoveAll(ws.Path); err != nil {
		t.Fatal(err)
	}
	gitT(t, repo, "worktree", "prune")
	gitT(t, repo, "branch", "-D", "patina/nobranch")
	got := mustGet(t, r, "nobranch")
	if !got.Missing || got.Head != "" {
		t.Fatalf("exp missing with no head, got %+v", got)
	}
	fixed, err := r.Repair(context.Background(), "nobranch")
	if err != nil {
		t.Fatal(err)
	}
	if fixed.Head != ws.Commit || !isWorktreeDir(fixed.Path) {
		t.Fatalf("exp branch re-created at %s, got %+v", ws.Commit, fixed)
	}
}

// A user's own worktree on the workspace branch is never taken for the
// workspace's: patina must not commit or clean up in the user's tree.
func TestUserWorktreeOnBranchNotAdopted(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ws := mustCreate(t, r, CreateRequest{Name: "review"})
	if err := os.RemoveAll(ws.Path); err != nil {
		t.Fatal(err)
	}
	gitT(t, repo, "worktree", "prune")
	mine := filepath.Join(tempDir(t), "review")
	gitT(t, repo, "worktree", "add", "-q", mine, "patina/review")
	writeFile(t, filepath.Join(mine, "mine.txt"), "the user's own work\n")

	got := mustGet(t, r, "review")
	if !got.Missing || got.Path != ws.Path {
		t.Fatalf("exp missing at %s, got %+v", ws.Path, got)
	}
	_, err := r.Commit(context.Background(), "review", CommitRequest{})
	wantErr(t, err, ErrMissing)
	if exp, got := "?? mine.txt", gitT(t, mine, "status", "--porcelain"); exp != got {
		t.Fatalf("exp the user's worktree untouched, got %q", got)
	}
	err = r.Delete(context.Background(), "review", DeleteRequest{})
	wantErr(t, err, ErrConflict)
}
