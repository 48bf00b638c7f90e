package worktree

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestDiff(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ws := mustCreate(t, r, CreateRequest{Name: "diffme"})
	in := newInside(t, ws)
	dir := in.Dir

	// Committed work, with plain git inside (not recorded)...
	writeFile(t, filepath.Join(dir, "committed.txt"), "one\ntwo\n")
	gitT(t, dir, "add", "committed.txt")
	gitT(t, dir, "commit", "-q", "-m", "agent commit")
	// ...staged, unstaged, deleted, untracked, binary, renamed and ignored.
	writeFile(t, filepath.Join(dir, "staged.txt"), "staged\n")
	gitT(t, dir, "add", "staged.txt")
	writeFile(t, filepath.Join(dir, "README.md"), "# demo\n\nline 1\nline 2 changed\nline 3\n")
	if err := os.Remove(filepath.Join(dir, "src", "b.txt")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "untracked dir", "new file.txt"), "hello\n")
	writeFile(t, filepath.Join(dir, "blob.bin"), "\x00\x01\x02binary\x00")
	gitT(t, dir, "mv", "src/a.txt", "src/renamed.txt")
	writeFile(t, filepath.Join(dir, "debug.log"), "ignored\n")

	user := snapshotUser(t, repo)
	repoBefore := snapshotRepo(t, repo)
	agentStatus := gitT(t, dir, "status", "--porcelain=v1")
	agentIndex := readFile(t, filepath.Join(dir, ".git", "index"))

	st := mustState(t, in)
	if !st.Dirty || st.Snapshot == st.Head || st.Branch != ws.Branch {
		t.Fatalf("exp a dirty state on %s, got %+v", ws.Branch, st)
	}
	d, err := r.Diff(testCtx(t), "diffme", DiffRequest{Head: st.Head, Snapshot: st.Snapshot, Source: insideSource{in}})
	if err != nil {
		t.Fatal(err)
	}
	exp := []FileStat{
		{Path: "README.md", Status: StatusModified, Added: 1, Deleted: 1},
		{Path: "blob.bin", Status: StatusAdded, Binary: true},
		{Path: "committed.txt", Status: StatusAdded, Added: 2},
		{Path: "src/b.txt", Status: StatusDeleted, Deleted: 1},
		{Path: "src/renamed.txt", OldPath: "src/a.txt", Status: StatusRenamed},
		{Path: "staged.txt", Status: StatusAdded, Added: 1},
		{Path: "untracked dir/new file.txt", Status: StatusAdded, Added: 1},
	}
	if !reflect.DeepEqual(exp, d.Files) {
		t.Fatalf("files:\nexp %+v\ngot %+v", exp, d.Files)
	}
	if d.Base != ws.BaseCommit || d.Commit != st.Head || !d.Uncommitted || d.Truncated || d.FilesTruncated {
		t.Errorf("exp base %s, commit %s, uncommitted, got %+v", ws.BaseCommit, st.Head, d)
	}
	if exp, got := gitT(t, dir, "rev-parse", st.Snapshot+"^{tree}"), d.Tree; exp != got {
		t.Errorf("exp tree %s, got %s", exp, got)
	}
	for _, want := range []string{
		"diff --git a/README.md b/README.md\n", "-line 2\n+line 2 changed\n",
		"+hello\n", "Binary files /dev/null and b/blob.bin differ",
		"rename from src/a.txt\nrename to src/renamed.txt", "deleted file mode",
	} {
		if !strings.Contains(d.Text, want) {
			t.Errorf("exp diff text to contain %q, got:\n%s", want, d.Text)
		}
	}
	if strings.Contains(d.Text, "debug.log") {
		t.Errorf("ignored file in diff:\n%s", d.Text)
	}

	// Diff wrote nothing to the user's repository, and staged nothing
	// anywhere.
	wantSameUser(t, user, snapshotUser(t, repo))
	wantSameRepo(t, repoBefore, snapshotRepo(t, repo))
	if exp, got := agentStatus, gitT(t, dir, "status", "--porcelain=v1"); exp != got {
		t.Errorf("workspace status changed:\nexp %q\ngot %q", exp, got)
	}
	if exp, got := agentIndex, readFile(t, filepath.Join(dir, ".git", "index")); exp != got {
		t.Errorf("workspace index changed")
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, ".git", "patina-index-*")); len(leftovers) != 0 {
		t.Errorf("temporary index left behind: %v", leftovers)
	}

	// Committed work only: Snapshot defaults to Head.
	d, err = r.Diff(testCtx(t), "diffme", DiffRequest{Head: st.Head, Source: insideSource{in}})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Files) != 1 || d.Files[0].Path != "committed.txt" || d.Uncommitted {
		t.Fatalf("exp only the committed file, got %+v", d)
	}
	// The snapshot must be a child of the head it claims.
	other := mustCreate(t, r, CreateRequest{Name: "other"})
	_, err = r.Diff(testCtx(t), "diffme", DiffRequest{Head: other.BaseCommit, Snapshot: st.Snapshot, Source: insideSource{in}})
	wantErr(t, err, ErrRejected)
}

func TestDiffEmpty(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ws := mustCreate(t, r, CreateRequest{Name: "clean"})
	in := newInside(t, ws)
	d := diffOf(t, r, ws, in)
	if d.Text != "" || len(d.Files) != 0 || d.Uncommitted {
		t.Fatalf("exp an empty diff, got %+v", d)
	}
	// Without an agent: the recorded tip.
	if d, err := r.Diff(testCtx(t), "clean", DiffRequest{}); err != nil || len(d.Files) != 0 || d.Commit != ws.BaseCommit {
		t.Fatalf("exp an empty diff of the base, got %+v, %v", d, err)
	}
	// The base moving on does not show up: the diff is against the base.
	userCommit(t, repo, map[string]string{"later.txt": "later\n"})
	if d := diffOf(t, r, ws, in); len(d.Files) != 0 {
		t.Fatalf("exp still empty, got %+v", d)
	}
}

// Once the agent merges the moved-on base branch into the workspace, or
// the workspace is merged back, Diff shows only what the base branch lacks.
func TestDiffAfterMerges(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ctx := testCtx(t)
	ws := mustCreate(t, r, CreateRequest{Name: "synced"})
	in := newInside(t, ws)
	agentCommit(t, r, ws, in, map[string]string{"agent.txt": "agent\n"})
	main := userCommit(t, repo, map[string]string{"user.txt": "user\n"})
	// The user's new commit is visible inside through the alternates.
	gitT(t, in.Dir, "merge", "-q", "--no-edit", main)
	mustRecord(t, r, ws, in)

	d := diffOf(t, r, ws, in)
	if len(d.Files) != 1 || d.Files[0].Path != "agent.txt" || d.Base != main {
		t.Fatalf("exp only agent.txt against main, got %+v", d)
	}

	if _, err := r.Merge(ctx, "synced", MergeRequest{}); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(in.Dir, "later.txt"), "later\n")
	d = diffOf(t, r, ws, in)
	if len(d.Files) != 1 || d.Files[0].Path != "later.txt" {
		t.Fatalf("exp only the unmerged later.txt, got %+v", d.Files)
	}
}

// A tracked file changed right after the workspace was initialised,
// within the same second and at the same size, still shows in the diff
// (git's racy-clean check depends on the index's mtime, which the
// snapshot's temporary index must keep).
func TestDiffSameSizeChangeInSameSecond(t *testing.T) {
	t.Parallel()
	for i := 0; i < 3; i++ {
		repo := newUserRepo(t)
		writeFile(t, filepath.Join(repo, "f"), "1\n")
		gitT(t, repo, "add", "f")
		gitT(t, repo, "commit", "-qm", "f")
		r := openRepo(t, repo)
		ws := mustCreate(t, r, CreateRequest{Name: fmt.Sprintf("racy%d", i)})
		in := newInside(t, ws)
		writeFile(t, filepath.Join(in.Dir, "f"), "2\n")
		// Diff in a later second than the change (as after a pause).
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 10*time.Millisecond)))
		if d := diffOf(t, r, ws, in); len(d.Files) != 1 || d.Files[0].Path != "f" {
			t.Fatalf("round %d: exp f changed, got %+v", i, d.Files)
		}
	}
}

func TestDiffLimits(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ws := mustCreate(t, r, CreateRequest{Name: "many"})
	in := newInside(t, ws)
	for i := range 30 {
		writeFile(t, filepath.Join(in.Dir, fmt.Sprintf("f%02d.txt", i)), strings.Repeat(fmt.Sprintf("line %d\n", i), 100))
	}
	st := mustState(t, in)
	d, err := r.Diff(testCtx(t), "many", DiffRequest{Head: st.Head, Snapshot: st.Snapshot, Source: insideSource{in}, MaxFiles: 10, MaxText: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Files) != 10 || !d.FilesTruncated || d.Files[0].Path != "f00.txt" || d.Files[9].Added != 100 {
		t.Fatalf("exp the first 10 files with counts, truncated, got %+v", d.Files)
	}
	if len(d.Text) > 1000 || !d.Truncated || !strings.HasPrefix(d.Text, "diff --git a/f00.txt") || !strings.HasSuffix(d.Text, "\n") {
		t.Fatalf("exp at most 1000 bytes of text ending a line, truncated, got %d bytes %v", len(d.Text), d.Truncated)
	}
	d, err = r.Diff(testCtx(t), "many", DiffRequest{Head: st.Head, Snapshot: st.Snapshot, Source: insideSource{in}})
	if err != nil || len(d.Files) != 30 || d.FilesTruncated || d.Truncated {
		t.Fatalf("exp everything by default, got %d files, %v, %v", len(d.Files), d.Truncated, err)
	}
}

// A huge file costs bounded memory in this process: git's output is
// streamed and cut at MaxText.
func TestDiffHugeFileBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a large file")
	}
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ws := mustCreate(t, r, CreateRequest{Name: "huge"})
	in := newInside(t, ws)
	size := 100 << 20
	if os.Getenv("PATINA_HUGE_DIFF") != "" {
		size = 300 << 20
	}
	f, err := os.Create(filepath.Join(in.Dir, "huge.txt"))
	if err != nil {
		t.Fatal(err)
	}
	line := []byte(strings.Repeat("0123456789abcdef", 7) + "\n")
	for n := 0; n < size; n += len(line) {
		f.Write(line)
	}
	f.Close()
	st := mustState(t, in)

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	d, err := r.Diff(testCtx(t), "huge", DiffRequest{Head: st.Head, Snapshot: st.Snapshot, Source: insideSource{in}, MaxText: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if !d.Truncated || len(d.Text) > 1<<20 || len(d.Files) != 1 {
		t.Fatalf("exp a truncated diff of one file, got %d bytes, %v, %+v", len(d.Text), d.Truncated, d.Files)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("diff of a %d MiB file: %d MiB allocated in this process", size>>20, alloc>>20)
	if alloc > 64<<20 {
		t.Fatalf("exp bounded memory, allocated %d MiB", alloc>>20)
	}
}
