package worktree

import (
	"os"
	"path/filepath"
	"testing"
)

// A merge into a branch checked out in one of the user's linked worktrees
// updates that worktree like git merge --ff-only would.
func TestMergeIntoLinkedWorktree(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	linked := filepath.Join(tempDir(t), "side")
	gitT(t, repo, "worktree", "add", "-q", "-b", "side", linked)
	ws := mustCreate(t, r, CreateRequest{Name: "toside", Base: "side"})
	tip := agentCommit(t, r, ws, newInside(t, ws), map[string]string{"side.txt": "side\n"})
	main := snapshotUser(t, repo)

	res, err := r.Merge(testCtx(t), "toside", MergeRequest{})
	if err != nil || res.Commit != tip || !res.FastForward || res.Into != "refs/heads/side" {
		t.Fatalf("exp side fast-forwarded to %s, got %+v, %v", tip, res, err)
	}
	if exp, got := "side\n", readFile(t, filepath.Join(linked, "side.txt")); exp != got {
		t.Fatalf("exp the file in the linked worktree, got %q", got)
	}
	if exp, got := "", gitT(t, linked, "status", "--porcelain"); exp != got {
		t.Fatalf("exp the linked worktree clean, got %q", got)
	}
	after := snapshotUser(t, repo)
	main.Refs, after.Refs = "", ""
	wantSameUser(t, main, after)
}

// Admin directories are read without git and their claims checked: one
// that lies about where a branch is checked out (pointing at the main
// working tree, at a genuine linked worktree, or at a directory in the
// legacy workspaces' area), or holds a FIFO, never makes patina run git
// in the wrong place.
func TestCheckedOutIgnoresLyingAdminDirs(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ctx := testCtx(t)
	gitT(t, repo, "branch", "release")
	linked := filepath.Join(tempDir(t), "side")
	gitT(t, repo, "worktree", "add", "-q", "-b", "side", linked)
	admins := filepath.Join(repo, ".git", "worktrees")

	lie := func(name, gitdir, head string) string {
		t.Helper()
		d := filepath.Join(admins, name)
		writeFile(t, filepath.Join(d, "gitdir"), gitdir+"\n")
		writeFile(t, filepath.Join(d, "HEAD"), head+"\n")
		return d
	}
	lie("liar1", filepath.Join(repo, ".git"), "ref: refs/heads/release")
	lie("liar2", filepath.Join(linked, ".git"), "ref: refs/heads/release")
	// A legacy-area directory whose .git file points back at its own admin
	// dir: looks genuine, but a workspace could write it.
	legacyDir := filepath.Join(r.WorktreesDir(), "liar3")
	d := lie("liar3", filepath.Join(legacyDir, ".git"), "ref: refs/heads/release")
	writeFile(t, filepath.Join(legacyDir, ".git"), "gitdir: "+d+"\n")
	fifo := filepath.Join(admins, "fifo")
	if err := os.MkdirAll(fifo, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscallMkfifo(filepath.Join(fifo, "gitdir")); err != nil {
		t.Skip("no FIFOs here:", err)
	}

	dir, _, err := r.checkedOut(ctx, "refs/heads/release")
	if err != nil || dir != "" {
		t.Fatalf("exp release checked out nowhere, got %q, %v", dir, err)
	}
	if dir, _, err := r.checkedOut(ctx, "refs/heads/side"); err != nil || dir != linked {
		t.Fatalf("exp side in %s, got %q, %v", linked, dir, err)
	}
	if dir, _, err := r.checkedOut(ctx, "refs/heads/main"); err != nil || dir != repo {
		t.Fatalf("exp main in %s, got %q, %v", repo, dir, err)
	}

	// So a merge into release only moves the ref.
	ws := mustCreate(t, r, CreateRequest{Name: "rel", Base: "release"})
	tip := agentCommit(t, r, ws, newInside(t, ws), map[string]string{"rel.txt": "rel\n"})
	before, side := snapshotUser(t, repo), snapshotUser(t, linked)
	if _, err := r.Merge(ctx, "rel", MergeRequest{}); err != nil {
		t.Fatal(err)
	}
	if exp, got := tip, gitT(t, repo, "rev-parse", "release"); exp != got {
		t.Fatalf("exp release at %s, got %s", exp, got)
	}
	after, sideAfter := snapshotUser(t, repo), snapshotUser(t, linked)
	before.Refs, after.Refs, side.Refs, sideAfter.Refs = "", "", "", ""
	wantSameUser(t, before, after)
	wantSameUser(t, side, sideAfter)
}
