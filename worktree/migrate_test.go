package worktree

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// legacyWorkspace is a workspace made the way patina did before issue 10.
type legacyWorkspace struct {
	id, name, start, path string
}

// makeLegacy creates a format-1 workspace the old way: a branch whose
// first commit is an empty start commit on the base, the notes on that
// commit, and a git worktree at <WorktreesDir>/<name>.
func makeLegacy(t *testing.T, r *Repo, name string) legacyWorkspace {
	t.Helper()
	repo := r.Root()
	lw := legacyWorkspace{id: uuid.NewString(), name: name, path: filepath.Join(r.WorktreesDir(), name)}
	base := gitT(t, repo, "rev-parse", "HEAD")
	msg := fmt.Sprintf("patina: start workspace %s\n\nPatina-Workspace-Id: %s\n", name, lw.id)
	out, err := gitTryIn(repo, msg, "commit-tree", base+"^{tree}", "-p", base, "-F", "-")
	if err != nil {
		t.Fatal(err)
	}
	lw.start = out
	gitT(t, repo, "update-ref", "refs/heads/patina/"+name, lw.start, "")
	if err := os.MkdirAll(r.WorktreesDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	gitT(t, repo, "worktree", "add", "-q", lw.path, "patina/"+name)
	state := fmt.Sprintf(`{"version":1,"id":%q,"name":%q,"branch":"patina/%s","base_ref":"refs/heads/main","base_commit":%q,"created_at":%q,"image":"img"}`,
		lw.id, name, name, base, time.Now().UTC().Format(time.RFC3339Nano))
	if _, err := gitTryIn(repo, state, "notes", "--ref", "patina-state", "add", "-F", "-", lw.start); err != nil {
		t.Fatal(err)
	}
	gitT(t, repo, "notes", "--ref", "patina-log", "add", "-m", "2025-11-21T05:00:00Z created: the old way", lw.start)
	return lw
}

func TestMigrateLegacy(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	state := t.TempDir()
	r := openRepoState(t, repo, state)
	ctx := testCtx(t)
	old := makeLegacy(t, r, "old")
	current := mustCreate(t, r, CreateRequest{Name: "current"})
	// The old agent's work: a commit, and uncommitted work.
	writeFile(t, filepath.Join(old.path, "committed.txt"), "committed the old way\n")
	gitT(t, old.path, "add", "committed.txt")
	gitT(t, old.path, "commit", "-q", "-m", "old agent commit")
	tip := gitT(t, old.path, "rev-parse", "HEAD")
	writeFile(t, filepath.Join(old.path, "src", "a.txt"), "uncommitted edit\n")
	writeFile(t, filepath.Join(old.path, "untracked.txt"), "untracked\n")

	// Both formats list.
	list, err := r.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 {
		t.Fatalf("exp 2 workspaces, got %+v", list)
	}
	ws := list[0]
	if ws.Name != "old" || !ws.Legacy || ws.Format != FormatLegacy || ws.Anchor != old.start || ws.Head != tip || ws.LegacyPath != old.path || ws.ID != old.id {
		t.Fatalf("exp the legacy workspace, got %+v", ws)
	}
	if list[1].ID != current.ID || list[1].Legacy {
		t.Fatalf("exp the current workspace, got %+v", list[1])
	}

	got, err := r.Migrate(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	if got.Legacy || got.Format != FormatCurrent || got.Anchor != r.format.anchorID(old.id) || got.Head != tip || got.LegacyPath != "" || got.Image != "img" {
		t.Fatalf("exp a current workspace at %s, got %+v", tip, got)
	}
	if wts := gitT(t, repo, "worktree", "list", "--porcelain"); strings.Count(wts, "worktree ") != 1 || !strings.HasPrefix(wts, "worktree "+repo+"\n") {
		t.Fatalf("exp only the main worktree left, got %q", wts)
	}
	if _, err := os.Stat(filepath.Join(repo, ".git", "worktrees", "old")); !os.IsNotExist(err) {
		t.Fatalf("exp the admin dir removed, got %v", err)
	}
	if _, err := gitTry(repo, "notes", "--ref", "patina-state", "show", old.start); err == nil {
		t.Fatalf("exp the old state note removed")
	}
	logText := gitT(t, repo, "notes", "--ref", "patina-log", "show", got.Anchor)
	if !strings.Contains(logText, "created: the old way") || !strings.Contains(logText, " migrated: from a legacy worktree") {
		t.Fatalf("exp the old log and a migrated line on the anchor, got %q", logText)
	}
	if fresh, err := openRepoState(t, repo, state).Get(ctx, "old"); err != nil || fresh.Legacy || fresh.Anchor != got.Anchor {
		t.Fatalf("exp a fresh Repo to list it as current, got %+v, %v", fresh, err)
	}
	if again, err := r.Migrate(ctx, "old"); err != nil || again.Anchor != got.Anchor {
		t.Fatalf("exp Migrate to be idempotent, got %+v, %v", again, err)
	}

	// The sidecar turns the old directory into the workspace's repository:
	// the files stay, uncommitted work shows as uncommitted.
	in := &Inside{Dir: old.path, Logger: testLogger(t)}
	if _, err := in.Init(ctx, InitRequest{Branch: got.Branch, Base: got.Head, Alternates: got.ObjectDirs, KeepFiles: true}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(old.path, ".git")); err != nil || !fi.IsDir() {
		t.Fatalf("exp .git a directory now, got %v", err)
	}
	if exp, got := "uncommitted edit\n", readFile(t, filepath.Join(old.path, "src", "a.txt")); exp != got {
		t.Fatalf("exp the uncommitted edit kept, got %q", got)
	}
	st := mustState(t, in)
	if st.Head != tip || !st.Dirty {
		t.Fatalf("exp dirty at %s, got %+v", tip, st)
	}
	if exp, got := " M src/a.txt\n?? untracked.txt", gitT(t, old.path, "status", "--porcelain"); exp != got {
		t.Fatalf("exp the old work as uncommitted, got %q", got)
	}
	d := diffOf(t, r, got, in)
	var paths []string
	for _, f := range d.Files {
		paths = append(paths, f.Path)
	}
	if exp := "committed.txt src/a.txt untracked.txt"; strings.Join(paths, " ") != exp {
		t.Fatalf("exp %s in the diff, got %q", exp, paths)
	}
	c, err := in.Commit(ctx, CommitRequest{Message: "after migration"})
	if err != nil {
		t.Fatal(err)
	}
	mustRecord(t, r, got, in)
	if res, err := r.Merge(ctx, "old", MergeRequest{Commit: c.Commit}); err != nil || !res.FastForward {
		t.Fatalf("exp a fast-forward, got %+v, %v", res, err)
	}
	if _, err := gitTry(repo, "fsck", "--full", "--strict", "--no-dangling"); err != nil {
		t.Fatal(err)
	}
}

// A legacy workspace could write its worktree admin dir: FIFOs, symlinks
// to host files. Migrate removes it without reading through any of them,
// nothing hangs, and the user's own linked worktree is left alone.
func TestMigrateHostileAdminDir(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ctx := testCtx(t)
	old := makeLegacy(t, r, "evil")
	other := makeLegacy(t, r, "evil2")
	userWt := filepath.Join(tempDir(t), "mine")
	gitT(t, repo, "worktree", "add", "-q", "-b", "mine", userWt)
	secret := filepath.Join(tempDir(t), "secret")
	writeFile(t, secret, "host secret\n")

	admin := filepath.Join(repo, ".git", "worktrees", "evil")
	for _, f := range []string{"gitdir", "HEAD"} {
		os.Remove(filepath.Join(admin, f))
		if err := syscallMkfifo(filepath.Join(admin, f)); err != nil {
			t.Skip("no FIFOs here:", err)
		}
	}
	for _, f := range []string{"commondir", "index", "config.worktree"} {
		os.Remove(filepath.Join(admin, f))
		if err := os.Symlink(secret, filepath.Join(admin, f)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/", filepath.Join(admin, "root")); err != nil {
		t.Fatal(err)
	}
	// The other legacy workspace claims, in its own admin dir, to be the
	// user's worktree on main.
	otherAdmin := filepath.Join(repo, ".git", "worktrees", "evil2")
	writeFile(t, filepath.Join(otherAdmin, "gitdir"), repo+"/.git\n")
	writeFile(t, filepath.Join(otherAdmin, "HEAD"), "ref: refs/heads/mine\n")

	start := time.Now()
	ws, err := r.Migrate(ctx, "evil")
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > 30*time.Second {
		t.Fatalf("Migrate took %v", time.Since(start))
	}
	if ws.Legacy {
		t.Fatalf("exp migrated, got %+v", ws)
	}
	if _, err := os.Lstat(admin); !os.IsNotExist(err) {
		t.Fatalf("exp the hostile admin dir removed, got %v", err)
	}
	if exp, got := "host secret\n", readFile(t, secret); exp != got {
		t.Fatalf("exp the host file untouched, got %q", got)
	}
	if _, err := os.Stat("/"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(repo, ".git", "worktrees", "mine")); err != nil {
		t.Fatalf("exp the user's linked worktree kept, got %v", err)
	}
	// The migrated workspace works; the lying admin dir does not make
	// patina think "mine" is checked out in the main working tree.
	in := &Inside{Dir: old.path, Logger: testLogger(t)}
	if _, err := in.Init(ctx, InitRequest{Branch: ws.Branch, Base: ws.Head, Alternates: ws.ObjectDirs, KeepFiles: true}); err != nil {
		t.Fatal(err)
	}
	tip := agentCommit(t, r, ws, in, map[string]string{"evil.txt": "work\n"})
	res, err := r.Merge(ctx, "evil", MergeRequest{Into: "main"})
	if err != nil || res.Commit != tip {
		t.Fatalf("exp a merge into main, got %+v, %v", res, err)
	}
	dir, _, err := r.checkedOut(ctx, "refs/heads/mine")
	if err != nil || dir != userWt {
		t.Fatalf("exp mine checked out in %s only, got %q, %v", userWt, dir, err)
	}
	if _, err := r.Migrate(ctx, other.name); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(otherAdmin); !os.IsNotExist(err) {
		t.Fatalf("exp the other admin dir removed, got %v", err)
	}
	out, err := gitTry(repo, "worktree", "list", "--porcelain")
	if err != nil || strings.Count(out, "worktree ") != 2 {
		t.Fatalf("exp the main and the user's worktree, got %q, %v", out, err)
	}
}

// A migration interrupted after the new state note was written is
// finished by Migrate; listing shows one workspace meanwhile.
func TestMigrateFinishesInterrupted(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ctx := testCtx(t)
	old := makeLegacy(t, r, "half")
	ws := mustGet(t, r, "half")
	cur := ws
	cur.Format, cur.Legacy, cur.Anchor = FormatCurrent, false, r.format.anchorID(ws.ID)
	if err := r.writeState(ctx, cur); err != nil {
		t.Fatal(err)
	}
	list, err := r.List(ctx)
	if err != nil || len(list) != 1 || list[0].Legacy {
		t.Fatalf("exp one current workspace listed, got %+v, %v", list, err)
	}
	if _, err := r.Migrate(ctx, "half"); err != nil {
		t.Fatal(err)
	}
	if _, err := gitTry(repo, "notes", "--ref", "patina-state", "show", old.start); err == nil {
		t.Fatalf("exp the old state note removed")
	}
	if _, err := os.Stat(filepath.Join(repo, ".git", "worktrees", "half")); !os.IsNotExist(err) {
		t.Fatalf("exp the admin dir removed, got %v", err)
	}
	if !strings.Contains(gitT(t, repo, "notes", "--ref", "patina-log", "show", cur.Anchor), "created: the old way") {
		t.Fatalf("exp the old log carried over")
	}
}

// Deleting a legacy workspace removes its admin dir too.
func TestDeleteLegacy(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	makeLegacy(t, r, "bygone")
	if err := r.Delete(testCtx(t), "bygone", DeleteRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(repo, ".git", "worktrees", "bygone")); !os.IsNotExist(err) {
		t.Fatalf("exp the admin dir removed, got %v", err)
	}
	if _, err := gitTry(repo, "rev-parse", "--verify", "refs/heads/patina/bygone"); err == nil {
		t.Fatalf("exp the branch deleted")
	}
}
