package worktree

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestMergeFastForward(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ws := mustCreate(t, r, CreateRequest{Name: "ff"})
	in := newInside(t, ws)
	old := gitT(t, repo, "rev-parse", "main")
	first := agentCommit(t, r, ws, in, map[string]string{"feature.txt": "feature\n", "src/a.txt": "alpha 2\n"})
	// A commit made with plain git inside, recorded.
	writeFile(t, filepath.Join(in.Dir, "second.txt"), "second\n")
	gitT(t, in.Dir, "add", "second.txt")
	gitT(t, in.Dir, "commit", "-q", "-m", "agent's second commit")
	tip := mustRecord(t, r, ws, in).Head
	// A local change elsewhere survives.
	writeFile(t, filepath.Join(repo, "src", "b.txt"), "bravo, locally edited\n")

	res, err := r.Merge(testCtx(t), "ff", MergeRequest{Commit: tip})
	if err != nil {
		t.Fatal(err)
	}
	exp := MergeResult{Into: "refs/heads/main", Previous: old, Commit: tip, Merged: tip, FastForward: true}
	if !reflect.DeepEqual(exp, res) {
		t.Fatalf("exp %+v, got %+v", exp, res)
	}
	if exp, got := tip, gitT(t, repo, "rev-parse", "main"); exp != got {
		t.Fatalf("exp main at %s, got %s", exp, got)
	}
	// Exactly the agent's commits were added: no start commit.
	if exp, got := tip+"\n"+first, gitT(t, repo, "rev-list", old+"..main"); exp != got {
		t.Fatalf("exp the agent's two commits added, got %q", got)
	}
	if exp, got := "feature\n", readFile(t, filepath.Join(repo, "feature.txt")); exp != got {
		t.Fatalf("exp merged file in the user's tree, got %q", got)
	}
	if exp, got := " M src/b.txt", gitT(t, repo, "status", "--porcelain"); exp != got {
		t.Fatalf("exp only the user's own change left, got %q", got)
	}
	events, _ := r.Log(testCtx(t), "ff")
	if last := events[len(events)-1]; last.Kind != EventMerged || !strings.Contains(last.Message, "fast-forward") {
		t.Fatalf("exp a merged event, got %+v", last)
	}
}

func TestMergeCommit(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ws := mustCreate(t, r, CreateRequest{Name: "diverge"})
	tip := agentCommit(t, r, ws, newInside(t, ws), map[string]string{"agent.txt": "agent\n"})
	userTip := userCommit(t, repo, map[string]string{"user.txt": "user\n"})

	res, err := r.Merge(testCtx(t), "diverge", MergeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if res.FastForward || res.UpToDate || res.Previous != userTip {
		t.Fatalf("exp a merge commit on %s, got %+v", userTip, res)
	}
	if exp, got := userTip+" "+tip, gitT(t, repo, "log", "-1", "--format=%P", "main"); exp != got {
		t.Fatalf("exp parents %s, got %s", exp, got)
	}
	if exp, got := "Merge patina workspace 'diverge' into main", gitT(t, repo, "log", "-1", "--format=%s", "main"); exp != got {
		t.Fatalf("exp message %q, got %q", exp, got)
	}
	if readFile(t, filepath.Join(repo, "agent.txt")) != "agent\n" || readFile(t, filepath.Join(repo, "user.txt")) != "user\n" {
		t.Fatalf("exp both sides in the user's tree")
	}
	if exp, got := "", gitT(t, repo, "status", "--porcelain"); exp != got {
		t.Fatalf("exp a clean tree, got %q", got)
	}
}

func TestMergeNoFastForward(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ws := mustCreate(t, r, CreateRequest{Name: "noff"})
	tip := agentCommit(t, r, ws, newInside(t, ws), map[string]string{"agent.txt": "agent\n"})
	res, err := r.Merge(testCtx(t), "noff", MergeRequest{NoFastForward: true, Message: "custom merge"})
	if err != nil {
		t.Fatal(err)
	}
	if res.FastForward || res.Commit == tip {
		t.Fatalf("exp a merge commit, got %+v", res)
	}
	if exp, got := "custom merge", gitT(t, repo, "log", "-1", "--format=%s", "main"); exp != got {
		t.Fatalf("exp message %q, got %q", exp, got)
	}
}

// A conflicting merge fails with ErrConflict and leaves the user's
// repository exactly as it was: status, HEAD, refs, index bytes, files.
func TestMergeConflictLeavesRepoUntouched(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ws := mustCreate(t, r, CreateRequest{Name: "clash"})
	agentCommit(t, r, ws, newInside(t, ws), map[string]string{"README.md": "# agent's readme\n", "agent.txt": "agent\n"})
	userCommit(t, repo, map[string]string{"README.md": "# user's readme\n"})
	// Unrelated local changes, staged and not, and an untracked file.
	writeFile(t, filepath.Join(repo, "src", "a.txt"), "alpha, unstaged edit\n")
	writeFile(t, filepath.Join(repo, "src", "b.txt"), "bravo, staged edit\n")
	gitT(t, repo, "add", "src/b.txt")
	writeFile(t, filepath.Join(repo, "scratch.txt"), "untracked\n")
	before := snapshotUser(t, repo)

	_, err := r.Merge(testCtx(t), "clash", MergeRequest{})
	wantErr(t, err, ErrConflict)
	var fe *FilesError
	if !errors.As(err, &fe) || !reflect.DeepEqual([]string{"README.md"}, fe.Files) {
		t.Fatalf("exp conflict in README.md, got %v", err)
	}
	// The advice names refs that exist: the target and the workspace's
	// branch, both in the user's repository.
	if !strings.Contains(err.Error(), "git switch main && git merge patina/clash") {
		t.Fatalf("exp advice naming main and patina/clash, got %v", err)
	}
	for _, ref := range []string{"refs/heads/main", "refs/heads/patina/clash"} {
		gitT(t, repo, "rev-parse", "--verify", ref)
	}
	wantSameUser(t, before, snapshotUser(t, repo))
	events, _ := r.Log(testCtx(t), "clash")
	if last := events[len(events)-1]; last.Kind == EventMerged {
		t.Fatalf("exp no merged event, got %+v", last)
	}
}

func TestMergeRefusesDirtyTouchedFiles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		dirty func(t *testing.T, repo string)
		files []string
	}{
		{"modified", func(t *testing.T, repo string) {
			writeFile(t, filepath.Join(repo, "src", "a.txt"), "user's uncommitted edit\n")
		}, []string{"src/a.txt"}},
		{"staged", func(t *testing.T, repo string) {
			writeFile(t, filepath.Join(repo, "src", "a.txt"), "user's staged edit\n")
			gitT(t, repo, "add", "src/a.txt")
		}, []string{"src/a.txt"}},
		{"untracked-in-the-way", func(t *testing.T, repo string) {
			writeFile(t, filepath.Join(repo, "new", "file.txt"), "user's own new file\n")
		}, []string{"new/file.txt"}},
		{"ignored-in-the-way", func(t *testing.T, repo string) {
			writeFile(t, filepath.Join(repo, "build.log"), "user's ignored file\n")
		}, []string{"build.log"}},
		{"merge-in-progress", func(t *testing.T, repo string) {
			writeFile(t, filepath.Join(repo, ".git", "MERGE_HEAD"), gitT(t, repo, "rev-parse", "HEAD")+"\n")
		}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			repo := newUserRepo(t)
			r := openRepo(t, repo)
			ws := mustCreate(t, r, CreateRequest{Name: "dirty"})
			in := newInside(t, ws)
			writeFile(t, filepath.Join(in.Dir, "build.log"), "agent's forced-in log\n")
			gitT(t, in.Dir, "add", "-f", "build.log")
			agentCommit(t, r, ws, in, map[string]string{"src/a.txt": "agent's edit\n", "new/file.txt": "agent's file\n"})
			tc.dirty(t, repo)
			before := snapshotUser(t, repo)

			_, err := r.Merge(testCtx(t), "dirty", MergeRequest{})
			wantErr(t, err, ErrDirty)
			var fe *FilesError
			if !errors.As(err, &fe) || !reflect.DeepEqual(tc.files, fe.Files) {
				t.Fatalf("exp dirty files %q, got %v", tc.files, err)
			}
			wantSameUser(t, before, snapshotUser(t, repo))
		})
	}
}

func TestMergeIntoBranchNotCheckedOut(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	gitT(t, repo, "branch", "release")
	ws := mustCreate(t, r, CreateRequest{Name: "rel"})
	tip := agentCommit(t, r, ws, newInside(t, ws), map[string]string{"fix.txt": "fix\n"})
	writeFile(t, filepath.Join(repo, "fix.txt"), "user's untracked file of the same name\n")
	before := snapshotUser(t, repo)

	res, err := r.Merge(testCtx(t), "rel", MergeRequest{Into: "release"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Into != "refs/heads/release" || res.Commit != tip || !res.FastForward {
		t.Fatalf("exp release fast-forwarded to %s, got %+v", tip, res)
	}
	if exp, got := tip, gitT(t, repo, "rev-parse", "release"); exp != got {
		t.Fatalf("exp release at %s, got %s", exp, got)
	}
	after := snapshotUser(t, repo)
	before.Refs, after.Refs = "", ""
	wantSameUser(t, before, after)
}

func TestMergeTargets(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ctx := testCtx(t)
	first := gitT(t, repo, "rev-parse", "HEAD~1")

	// Created from a commit with a target (a fork of a workspace of
	// main): merges go there by default.
	fk := mustCreate(t, r, CreateRequest{Name: "forked", Base: first, Target: "refs/heads/main"})
	if fk.BaseRef != "refs/heads/main" || fk.BaseCommit != first {
		t.Fatalf("exp base main at %s, got %s at %s", first, fk.BaseRef, fk.BaseCommit)
	}
	agentCommit(t, r, fk, newInside(t, fk), map[string]string{"fork.txt": "fork\n"})
	if res, err := r.Merge(ctx, "forked", MergeRequest{}); err != nil || res.Into != "refs/heads/main" {
		t.Fatalf("exp the fork to merge into main, got %+v %v", res, err)
	}
	if _, err := r.Create(ctx, CreateRequest{Name: "badtarget", Base: first, Target: "refs/heads/-x"}); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("exp a bad target refused, got %v", err)
	}

	// Created from a commit: no default target.
	ws := mustCreate(t, r, CreateRequest{Name: "fromcommit", Base: first})
	agentCommit(t, r, ws, newInside(t, ws), map[string]string{"x.txt": "x\n"})
	_, err := r.Merge(ctx, "fromcommit", MergeRequest{})
	wantErr(t, err, ErrNoTarget)
	if _, err := r.Merge(ctx, "fromcommit", MergeRequest{Into: "main"}); err != nil {
		t.Fatalf("exp an explicit target to work, got %v", err)
	}

	for into, exp := range map[string]error{
		"no-such-branch":    ErrNotFound,
		"-evil":             ErrInvalidName,
		"a..b":              ErrInvalidName,
		"patina/fromcommit": ErrNoTarget,
		"main\x00":          ErrInvalidName,
	} {
		_, err := r.Merge(ctx, "fromcommit", MergeRequest{Into: into})
		if !errors.Is(err, exp) {
			t.Errorf("Merge into %q: exp %v, got %v", into, exp, err)
		}
	}
	_, err = r.Merge(ctx, "ghost", MergeRequest{})
	wantErr(t, err, ErrNotFound)
}

func TestMergeNothingToMerge(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ctx := testCtx(t)
	ws := mustCreate(t, r, CreateRequest{Name: "idle"})
	in := newInside(t, ws)
	writeFile(t, filepath.Join(in.Dir, "uncommitted.txt"), "not merged\n")
	mustRecord(t, r, ws, in)
	main := gitT(t, repo, "rev-parse", "main")

	res, err := r.Merge(ctx, "idle", MergeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.UpToDate || res.Commit != main {
		t.Fatalf("exp up to date, got %+v", res)
	}
	if exp, got := main, gitT(t, repo, "rev-parse", "main"); exp != got {
		t.Fatalf("exp main unmoved at %s, got %s", exp, got)
	}
	if _, err := os.Stat(filepath.Join(repo, "uncommitted.txt")); err == nil {
		t.Fatalf("uncommitted work was merged")
	}
	// A workspace from an older commit, into another branch: still nothing
	// of the agent's to merge.
	gitT(t, repo, "branch", "release", "HEAD~1")
	old := mustCreate(t, r, CreateRequest{Name: "old", Base: "HEAD~1"})
	if res, err := r.Merge(ctx, old.Name, MergeRequest{Into: "main"}); err != nil || !res.UpToDate {
		t.Fatalf("exp up to date, got %+v, %v", res, err)
	}

	// Merged once, merging again is up to date.
	agentCommit(t, r, ws, in, map[string]string{"done.txt": "done\n"})
	if _, err := r.Merge(ctx, "idle", MergeRequest{}); err != nil {
		t.Fatal(err)
	}
	res, err = r.Merge(ctx, "idle", MergeRequest{})
	if err != nil || !res.UpToDate {
		t.Fatalf("exp up to date, got %+v, %v", res, err)
	}
}

// What the user reviewed is what is merged: a merge of the reviewed commit
// takes exactly it, not what the workspace recorded after; a commit that
// is not on the workspace's branch is refused, changing nothing.
func TestMergePinnedCommit(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ctx := testCtx(t)
	ws := mustCreate(t, r, CreateRequest{Name: "pinned"})
	in := newInside(t, ws)
	agentCommit(t, r, ws, in, map[string]string{"a.txt": "a\n"})
	reviewed := diffOf(t, r, ws, in).Commit
	// The agent carries on after the review.
	later := agentCommit(t, r, ws, in, map[string]string{"sneaky.txt": "not reviewed\n"})
	// Not on the branch: a commit of the user's that nothing references,
	// the base's parent; a blob; an object that is not there.
	userCommit := gitT(t, repo, "commit-tree", "-p", ws.BaseCommit, "-m", "user's", ws.BaseCommit+"^{tree}")
	blob := gitT(t, repo, "rev-parse", ws.BaseCommit+":src/a.txt")
	before := snapshotUser(t, repo)
	for _, c := range []string{userCommit, gitT(t, repo, "rev-parse", ws.BaseCommit+"^"), blob, strings.Repeat("0", len(blob))} {
		_, err := r.Merge(ctx, "pinned", MergeRequest{Commit: c})
		wantErr(t, err, ErrNotOnBranch)
	}
	wantSameUser(t, before, snapshotUser(t, repo))
	_, err := r.Merge(ctx, "pinned", MergeRequest{Commit: "HEAD"})
	wantErr(t, err, ErrInvalidName)

	res, err := r.Merge(ctx, "pinned", MergeRequest{Commit: reviewed})
	if err != nil || res.Commit != reviewed || res.Merged != reviewed || !res.FastForward {
		t.Fatalf("exp a fast-forward to the reviewed commit, got %+v, %v", res, err)
	}
	if got := gitT(t, repo, "ls-tree", "--name-only", "main", "sneaky.txt"); got != "" {
		t.Fatalf("exp sneaky.txt left out, got %q", got)
	}
	// The base commit itself is on the branch: nothing to merge.
	if res, err := r.Merge(ctx, "pinned", MergeRequest{Commit: ws.BaseCommit}); err != nil || !res.UpToDate {
		t.Fatalf("exp the base commit up to date, got %+v, %v", res, err)
	}
	if res, err := r.Merge(ctx, "pinned", MergeRequest{Commit: later}); err != nil || res.Commit != later || res.Merged != later {
		t.Fatalf("exp the later tip merged, got %+v, %v", res, err)
	}
}
