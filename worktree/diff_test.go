package worktree

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestDiff(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ctx := context.Background()
	ws := mustCreate(t, r, CreateRequest{Name: "diffme"})

	// Committed work...
	writeFile(t, filepath.Join(ws.Path, "committed.txt"), "one\ntwo\n")
	gitT(t, ws.Path, "add", "committed.txt")
	gitT(t, ws.Path, "commit", "-q", "-m", "agent commit")
	// ...staged, unstaged, deleted, untracked, binary, renamed and ignored.
	writeFile(t, filepath.Join(ws.Path, "staged.txt"), "staged\n")
	gitT(t, ws.Path, "add", "staged.txt")
	writeFile(t, filepath.Join(ws.Path, "README.md"), "# demo\n\nline 1\nline 2 changed\nline 3\n")
	if err := os.Remove(filepath.Join(ws.Path, "src", "b.txt")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ws.Path, "untracked dir", "new file.txt"), "hello\n")
	writeFile(t, filepath.Join(ws.Path, "blob.bin"), "\x00\x01\x02binary\x00")
	gitT(t, ws.Path, "mv", "src/a.txt", "src/renamed.txt")
	writeFile(t, filepath.Join(ws.Path, "debug.log"), "ignored\n")

	user := snapshotUser(t, repo)
	agentStatus := gitT(t, ws.Path, "status", "--porcelain=v1")
	agentIndex := readFile(t, filepath.Join(gitT(t, ws.Path, "rev-parse", "--absolute-git-dir"), "index"))

	d, err := r.Diff(ctx, "diffme")
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
	if exp, got := ws.BaseCommit, d.Base; exp != got {
		t.Errorf("exp base %s, got %s", exp, got)
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

	// Nothing was staged anywhere.
	wantSameUser(t, user, snapshotUser(t, repo))
	if exp, got := agentStatus, gitT(t, ws.Path, "status", "--porcelain=v1"); exp != got {
		t.Errorf("workspace status changed:\nexp %q\ngot %q", exp, got)
	}
	if exp, got := agentIndex, readFile(t, filepath.Join(gitT(t, ws.Path, "rev-parse", "--absolute-git-dir"), "index")); exp != got {
		t.Errorf("workspace index changed")
	}
	leftovers, _ := filepath.Glob(filepath.Join(gitT(t, ws.Path, "rev-parse", "--absolute-git-dir"), "patina-index-*"))
	if len(leftovers) != 0 {
		t.Errorf("temporary index left behind: %v", leftovers)
	}
}

func TestDiffEmpty(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	mustCreate(t, r, CreateRequest{Name: "clean"})
	d, err := r.Diff(context.Background(), "clean")
	if err != nil {
		t.Fatal(err)
	}
	if d.Text != "" || len(d.Files) != 0 {
		t.Fatalf("exp an empty diff, got %+v", d)
	}
	// The base moving on does not show up: the diff is against the base.
	writeFile(t, filepath.Join(repo, "later.txt"), "later\n")
	gitT(t, repo, "add", "later.txt")
	gitT(t, repo, "commit", "-q", "-m", "later")
	if d, err := r.Diff(context.Background(), "clean"); err != nil || len(d.Files) != 0 {
		t.Fatalf("exp still empty, got %+v, %v", d, err)
	}
}

// Once the agent merges the moved-on base branch into the workspace, or
// the workspace is merged back, Diff shows only what the base branch lacks.
func TestDiffAfterMerges(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ctx := context.Background()
	ws := mustCreate(t, r, CreateRequest{Name: "synced"})
	agentCommit(t, r, ws, map[string]string{"agent.txt": "agent\n"})
	userCommit(t, repo, map[string]string{"user.txt": "user\n"})
	gitT(t, ws.Path, "merge", "-q", "--no-edit", "main")

	d, err := r.Diff(ctx, "synced")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Files) != 1 || d.Files[0].Path != "agent.txt" || d.Base != gitT(t, repo, "rev-parse", "main") {
		t.Fatalf("exp only agent.txt against main, got %+v", d)
	}

	if _, err := r.Merge(ctx, "synced", MergeRequest{}); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ws.Path, "later.txt"), "later\n")
	d, err = r.Diff(ctx, "synced")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Files) != 1 || d.Files[0].Path != "later.txt" {
		t.Fatalf("exp only the unmerged later.txt, got %+v", d.Files)
	}
}

// A tracked file changed right after the workspace was created, within the
// same second and at the same size, still shows in the diff (git's
// racy-clean check depends on the index's mtime, which the snapshot must
// keep).
func TestDiffSameSizeChangeInSameSecond(t *testing.T) {
	t.Parallel()
	for i := 0; i < 3; i++ {
		repo := newUserRepo(t)
		writeFile(t, filepath.Join(repo, "f"), "1\n")
		gitT(t, repo, "add", "f")
		gitT(t, repo, "commit", "-qm", "f")
		r := openRepo(t, repo)
		ws := mustCreate(t, r, CreateRequest{Name: fmt.Sprintf("racy%d", i)})
		writeFile(t, filepath.Join(ws.Path, "f"), "2\n")
		// Diff in a later second than the change (as after a pause).
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 10*time.Millisecond)))
		d, err := r.Diff(context.Background(), ws.Name)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Files) != 1 || d.Files[0].Path != "f" {
			t.Fatalf("round %d: exp f changed, got %+v", i, d.Files)
		}
	}
}
