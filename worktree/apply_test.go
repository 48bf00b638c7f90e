package worktree

import (
	"errors"
	"path/filepath"
	"reflect"
	"testing"
)

func TestApply(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ctx := testCtx(t)
	ws := mustCreate(t, r, CreateRequest{Name: "squash"})
	in := newInside(t, ws)
	agentCommit(t, r, ws, in, map[string]string{"committed.txt": "committed\n"})
	writeFile(t, filepath.Join(in.Dir, "src", "a.txt"), "alpha, uncommitted\n")
	writeFile(t, filepath.Join(in.Dir, "untracked.txt"), "untracked\n")
	// The user moved on meanwhile, and has a local edit elsewhere.
	userTip := userCommit(t, repo, map[string]string{"user.txt": "user\n"})
	writeFile(t, filepath.Join(repo, "src", "b.txt"), "bravo, user's edit\n")

	st := mustState(t, in)
	req := ApplyRequest{Snapshot: st.Snapshot, Source: insideSource{in}}
	res, err := r.Apply(ctx, "squash", req)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range res.Files {
		paths = append(paths, f.Path)
	}
	if exp := []string{"committed.txt", "src/a.txt", "untracked.txt"}; !reflect.DeepEqual(exp, paths) {
		t.Fatalf("exp applied %q, got %q", exp, paths)
	}
	if exp, got := repo, res.Dir; exp != got {
		t.Fatalf("exp dir %s, got %s", exp, got)
	}
	if exp, got := userTip, gitT(t, repo, "rev-parse", "HEAD"); exp != got {
		t.Fatalf("exp HEAD unmoved at %s, got %s", exp, got)
	}
	if exp, got := "A\tcommitted.txt\nM\tsrc/a.txt\nA\tuntracked.txt", gitT(t, repo, "diff", "--cached", "--name-status"); exp != got {
		t.Fatalf("exp staged %q, got %q", exp, got)
	}
	if exp, got := "M\tsrc/b.txt", gitT(t, repo, "diff", "--name-status"); exp != got {
		t.Fatalf("exp the user's unstaged edit kept, got %q", got)
	}
	if exp, got := "alpha, uncommitted\n", readFile(t, filepath.Join(repo, "src", "a.txt")); exp != got {
		t.Fatalf("exp applied content, got %q", got)
	}
	if exp, got := res.Tree, gitT(t, repo, "write-tree"); exp != got {
		t.Fatalf("exp index tree %s, got %s", exp, got)
	}

	// Applying again: already there, nothing to do.
	again, err := r.Apply(ctx, "squash", req)
	if err != nil || len(again.Files) != 0 {
		t.Fatalf("exp a no-op, got %+v, %v", again, err)
	}
}

func TestApplyCommittedOnly(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ws := mustCreate(t, r, CreateRequest{Name: "committed"})
	in := newInside(t, ws)
	agentCommit(t, r, ws, in, map[string]string{"committed.txt": "committed\n"})
	writeFile(t, filepath.Join(in.Dir, "uncommitted.txt"), "not this\n")
	st := mustState(t, in)
	if _, err := r.Apply(testCtx(t), "committed", ApplyRequest{Snapshot: st.Snapshot, Source: insideSource{in}, CommittedOnly: true}); err != nil {
		t.Fatal(err)
	}
	if exp, got := "A\tcommitted.txt", gitT(t, repo, "diff", "--cached", "--name-status"); exp != got {
		t.Fatalf("exp staged %q, got %q", exp, got)
	}
}

func TestApplyRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		user  func(t *testing.T, repo string)
		exp   error
		files []string
	}{
		{"conflict", func(t *testing.T, repo string) {
			userCommit(t, repo, map[string]string{"src/a.txt": "user's committed alpha\n"})
		}, ErrConflict, []string{"src/a.txt"}},
		{"dirty", func(t *testing.T, repo string) {
			writeFile(t, filepath.Join(repo, "src", "a.txt"), "user's uncommitted alpha\n")
		}, ErrDirty, []string{"src/a.txt"}},
		{"untracked-in-the-way", func(t *testing.T, repo string) {
			writeFile(t, filepath.Join(repo, "agent.txt"), "user's file\n")
		}, ErrDirty, []string{"agent.txt"}},
		{"ignored-in-the-way", func(t *testing.T, repo string) {
			writeFile(t, filepath.Join(repo, "agent.log"), "user's precious ignored file\n")
		}, ErrDirty, []string{"agent.log"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			repo := newUserRepo(t)
			r := openRepo(t, repo)
			ws := mustCreate(t, r, CreateRequest{Name: "refused"})
			in := newInside(t, ws)
			writeFile(t, filepath.Join(in.Dir, "src", "a.txt"), "agent's alpha\n")
			writeFile(t, filepath.Join(in.Dir, "agent.txt"), "agent\n")
			writeFile(t, filepath.Join(in.Dir, "agent.log"), "forced in\n")
			gitT(t, in.Dir, "add", "-f", "agent.log")
			st := mustState(t, in)
			tc.user(t, repo)
			before := snapshotUser(t, repo)

			_, err := r.Apply(testCtx(t), "refused", ApplyRequest{Snapshot: st.Snapshot, Source: insideSource{in}})
			wantErr(t, err, tc.exp)
			var fe *FilesError
			if !errors.As(err, &fe) || !reflect.DeepEqual(tc.files, fe.Files) {
				t.Fatalf("exp files %q, got %v", tc.files, err)
			}
			wantSameUser(t, before, snapshotUser(t, repo))
		})
	}
}

// Apply without a snapshot applies the recorded tip; a hostile snapshot is
// refused before anything is written.
func TestApplyRecordedAndRefusedSnapshot(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ws := mustCreate(t, r, CreateRequest{Name: "rec"})
	in := newInside(t, ws)
	agentCommit(t, r, ws, in, map[string]string{"kept.txt": "kept\n"})

	blob := hashIn(t, in.Dir, "blob", "a blob\n")
	before := snapshotUser(t, repo)
	repoBefore := snapshotRepo(t, repo)
	_, err := r.Apply(testCtx(t), "rec", ApplyRequest{Snapshot: blob, Source: bytesSource(rawPack(t, in.Dir, blob))})
	wantErr(t, err, ErrRejected)
	wantSameUser(t, before, snapshotUser(t, repo))
	wantSameRepo(t, repoBefore, snapshotRepo(t, repo))

	if _, err := r.Apply(testCtx(t), "rec", ApplyRequest{}); err != nil {
		t.Fatal(err)
	}
	if exp, got := "A\tkept.txt", gitT(t, repo, "diff", "--cached", "--name-status"); exp != got {
		t.Fatalf("exp staged %q, got %q", exp, got)
	}
}
