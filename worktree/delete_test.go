package worktree

import (
	"path/filepath"
	"strings"
	"testing"
)

// patinaNotes are the refs Delete may leave changed: the notes refs keep
// their history.
var patinaNotes = []string{"refs/notes/patina-"}

func TestDelete(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ctx := testCtx(t)
	before := snapshotRepo(t, repo, patinaNotes...)
	ws := mustCreate(t, r, CreateRequest{Name: "doomed"})
	in := newInside(t, ws)
	agentCommit(t, r, ws, in, map[string]string{"work.txt": "work\n"})
	other := mustCreate(t, r, CreateRequest{Name: "survivor"})
	user := snapshotUser(t, repo)

	if err := r.Delete(ctx, "doomed", DeleteRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := gitTry(repo, "rev-parse", "--verify", "refs/heads/patina/doomed"); err == nil {
		t.Fatalf("exp branch deleted")
	}
	for _, ref := range []string{"patina-state", "patina-log"} {
		if _, err := gitTry(repo, "notes", "--ref", ref, "show", ws.Anchor); err == nil {
			t.Fatalf("exp %s note removed", ref)
		}
	}
	_, err := r.Get(ctx, "doomed")
	wantErr(t, err, ErrNotFound)
	if list, _ := r.List(ctx); len(list) != 1 || list[0].ID != other.ID {
		t.Fatalf("exp only the survivor, got %+v", list)
	}
	wantSameUser(t, user, snapshotUser(t, repo))

	// With the survivor gone too, refs and config are as before either
	// workspace, but for the notes refs; objects the workspace brought in
	// may stay until gc.
	if err := r.Delete(ctx, "survivor", DeleteRequest{}); err != nil {
		t.Fatal(err)
	}
	after := snapshotRepo(t, repo, patinaNotes...)
	before.Objects, after.Objects = nil, nil
	wantSameRepo(t, before, after)

	// The name is free again.
	mustCreate(t, r, CreateRequest{Name: "doomed"})
	err = r.Delete(ctx, "ghost", DeleteRequest{})
	wantErr(t, err, ErrNotFound)
}

func TestDeleteKeepBranch(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ctx := testCtx(t)
	before := snapshotRepo(t, repo, patinaNotes...)
	ws := mustCreate(t, r, CreateRequest{Name: "keeper"})
	tip := agentCommit(t, r, ws, newInside(t, ws), map[string]string{"work.txt": "work\n"})

	if err := r.Delete(ctx, "keeper", DeleteRequest{KeepBranch: true}); err != nil {
		t.Fatal(err)
	}
	if exp, got := tip, gitT(t, repo, "rev-parse", "refs/heads/patina/keeper"); exp != got {
		t.Fatalf("exp branch kept at %s, got %s", exp, got)
	}
	if _, err := gitTry(repo, "notes", "--ref", "patina-state", "show", ws.Anchor); err == nil {
		t.Fatalf("exp state note removed")
	}
	logText := gitT(t, repo, "notes", "--ref", "patina-log", "show", ws.Anchor)
	if !strings.Contains(logText, " deleted: workspace deleted, branch kept at "+tip) {
		t.Fatalf("exp log note kept with a deleted line, got %q", logText)
	}
	if list, _ := r.List(ctx); len(list) != 0 {
		t.Fatalf("exp no workspace listed, got %+v", list)
	}
	_, err := r.Create(ctx, CreateRequest{Name: "keeper"})
	wantErr(t, err, ErrExists)
	after := snapshotRepo(t, repo, append(patinaNotes, "refs/heads/patina/keeper")...)
	before.Objects, after.Objects = nil, nil
	wantSameRepo(t, before, after)
}

// Delete will not delete a branch the user has checked out.
func TestDeleteRefusesCheckedOutBranch(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ctx := testCtx(t)
	mustCreate(t, r, CreateRequest{Name: "inuse"})
	linked := filepath.Join(tempDir(t), "linked")
	gitT(t, repo, "worktree", "add", "-q", linked, "patina/inuse")

	err := r.Delete(ctx, "inuse", DeleteRequest{})
	wantErr(t, err, ErrConflict)
	if !strings.Contains(err.Error(), linked) {
		t.Fatalf("exp the error to name %s, got %v", linked, err)
	}
	if err := r.Delete(ctx, "inuse", DeleteRequest{KeepBranch: true}); err != nil {
		t.Fatalf("exp KeepBranch to work, got %v", err)
	}
}
