package worktree

import (
	"encoding/json"
	"path/filepath"
	"testing"
)

// Everything but Merge and Apply leaves the user's index and working tree
// alone, even with local changes in it.
func TestUserTreeUntouched(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	writeFile(t, filepath.Join(repo, "src", "a.txt"), "user's unstaged edit\n")
	writeFile(t, filepath.Join(repo, "src", "b.txt"), "user's staged edit\n")
	gitT(t, repo, "add", "src/b.txt")
	writeFile(t, filepath.Join(repo, "notes.txt"), "user's untracked file\n")
	before := snapshotUser(t, repo)

	r := openRepo(t, repo)
	ctx := testCtx(t)
	ws := mustCreate(t, r, CreateRequest{Name: "quiet", Meta: json.RawMessage(`{}`)})
	in := newInside(t, ws)
	writeFile(t, filepath.Join(in.Dir, "src", "a.txt"), "agent's edit\n")
	steps := []func() error{
		func() error { _, err := r.List(ctx); return err },
		func() error { diffOf(t, r, ws, in); return nil },
		func() error { _, err := r.SetMeta(ctx, "quiet", json.RawMessage(`{"a":1}`)); return err },
		func() error { return r.AppendLog(ctx, "quiet", Event{Kind: EventCommand, Message: "ls"}) },
		func() error { _, err := in.Commit(ctx, CommitRequest{}); return err },
		func() error { mustRecord(t, r, ws, in); return nil },
		func() error { _, err := r.Log(ctx, "quiet"); return err },
		func() error { return r.Delete(ctx, "quiet", DeleteRequest{KeepBranch: true}) },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		wantSameUser(t, before, snapshotUser(t, repo))
	}
}
