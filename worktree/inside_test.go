package worktree

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestInsideInit(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ctx := testCtx(t)
	ws := mustCreate(t, r, CreateRequest{Name: "init"})
	user := snapshotRepo(t, repo, "refs/notes/patina-", "refs/heads/patina/")
	in := newInside(t, ws)
	dir := in.Dir

	if exp, got := ws.ObjectDirs[0]+"\n", readFile(t, filepath.Join(dir, ".git", "objects", "info", "alternates")); exp != got {
		t.Fatalf("exp alternates %q, got %q", exp, got)
	}
	if exp, got := "refs/heads/"+ws.Branch, gitT(t, dir, "symbolic-ref", "HEAD"); exp != got {
		t.Fatalf("exp HEAD on %s, got %s", exp, got)
	}
	if exp, got := ws.BaseCommit, gitT(t, dir, "rev-parse", "HEAD"); exp != got {
		t.Fatalf("exp HEAD at %s, got %s", exp, got)
	}
	if exp, got := "alpha\n", readFile(t, filepath.Join(dir, "src", "a.txt")); exp != got {
		t.Fatalf("exp the files checked out, got %q", got)
	}
	if exp, got := "", gitT(t, dir, "status", "--porcelain"); exp != got {
		t.Fatalf("exp a clean workspace, got %q", got)
	}
	if exp, got := agentIdentity.Name, gitT(t, dir, "config", "--local", "user.name"); exp != got {
		t.Fatalf("exp identity %s, got %s", exp, got)
	}
	// No object was copied: they are borrowed.
	if out := gitT(t, dir, "count-objects", "-v"); !strings.Contains(out, "count: 0") || !strings.Contains(out, "in-pack: 0") {
		t.Fatalf("exp no objects of its own, got %s", out)
	}

	// Work in progress survives a restart: Init again leaves everything,
	// but rewrites the alternates.
	writeFile(t, filepath.Join(dir, "wip.txt"), "work in progress\n")
	gitT(t, dir, "add", "wip.txt")
	gitT(t, dir, "commit", "-q", "-m", "wip")
	head := gitT(t, dir, "rev-parse", "HEAD")
	writeFile(t, filepath.Join(dir, "README.md"), "uncommitted\n")
	res, err := in.Init(ctx, InitRequest{Branch: ws.Branch, Base: ws.BaseCommit, Alternates: append(ws.ObjectDirs, "/elsewhere/objects")})
	if err != nil || res.Created || res.Head != head {
		t.Fatalf("exp nothing created, HEAD %s, got %+v, %v", head, res, err)
	}
	if exp, got := " M README.md", gitT(t, dir, "status", "--porcelain"); exp != got {
		t.Fatalf("exp the uncommitted edit kept, got %q", got)
	}
	if exp, got := ws.ObjectDirs[0]+"\n/elsewhere/objects\n", readFile(t, filepath.Join(dir, ".git", "objects", "info", "alternates")); exp != got {
		t.Fatalf("exp alternates rewritten %q, got %q", exp, got)
	}
	wantSameRepo(t, user, snapshotRepo(t, repo, "refs/notes/patina-", "refs/heads/patina/"))
}

// An Init cut short (the container died) is completed by the next one.
func TestInsideInitCompletesInterrupted(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ws := mustCreate(t, r, CreateRequest{Name: "cut"})
	dir := filepath.Join(tempDir(t), "workspace")
	gitT(t, tempDir(t), "init", "-q", dir)
	in := &Inside{Dir: dir}
	res, err := in.Init(testCtx(t), InitRequest{Branch: ws.Branch, Base: ws.BaseCommit, Alternates: ws.ObjectDirs})
	if err != nil || !res.Created || res.Head != ws.BaseCommit {
		t.Fatalf("exp an Init at %s, got %+v, %v", ws.BaseCommit, res, err)
	}
	if exp, got := "alpha\n", readFile(t, filepath.Join(dir, "src", "a.txt")); exp != got {
		t.Fatalf("exp the files checked out, got %q", got)
	}
}

func TestInsideInitRefuses(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	base := gitT(t, repo, "rev-parse", "HEAD")
	objects := filepath.Join(repo, ".git", "objects")
	ctx := testCtx(t)
	gitfile := tempDir(t)
	writeFile(t, filepath.Join(gitfile, ".git"), "gitdir: /somewhere/else\n")
	tests := []struct {
		name string
		dir  string
		req  InitRequest
		exp  error
	}{
		{"bad-branch", tempDir(t), InitRequest{Branch: "-x", Base: base, Alternates: []string{objects}}, ErrInvalidName},
		{"bad-base", tempDir(t), InitRequest{Branch: "patina/x", Base: "HEAD", Alternates: []string{objects}}, ErrInvalidName},
		{"unknown-base", tempDir(t), InitRequest{Branch: "patina/x", Base: strings.Repeat("1", 40), Alternates: []string{objects}}, ErrNotFound},
		{"no-alternates", tempDir(t), InitRequest{Branch: "patina/x", Base: base}, ErrNotFound},
		{"gitfile", gitfile, InitRequest{Branch: "patina/x", Base: base, Alternates: []string{objects}}, ErrExists},
	}
	for _, tc := range tests {
		in := &Inside{Dir: tc.dir}
		_, err := in.Init(ctx, tc.req)
		if !errors.Is(err, tc.exp) {
			t.Errorf("%s: exp %v, got %v", tc.name, tc.exp, err)
		}
	}
	if _, err := (&Inside{Dir: "relative"}).Init(ctx, InitRequest{Branch: "patina/x", Base: base}); err == nil {
		t.Errorf("exp a relative Dir refused")
	}
	if _, err := (&Inside{Dir: tempDir(t)}).Init(ctx, InitRequest{Branch: "patina/x", Base: base, Alternates: []string{"rel/objects"}}); err == nil {
		t.Errorf("exp a relative alternate refused")
	}
}

// git works inside as in a clone: status, add, commit, log, diff, branch,
// stash, checkout -b, rebase, gc; and none of it touches the user's
// repository.
func TestGitWorksInside(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ws := mustCreate(t, r, CreateRequest{Name: "clone-like"})
	before := snapshotRepo(t, repo)
	in := newInside(t, ws)
	script := `set -e
		git status --short
		echo one > one.txt && git add one.txt && git commit -q -m one
		git log --oneline | head -3
		echo change >> README.md && git diff --stat
		git stash -q && git stash pop -q
		git commit -q -am "readme"
		git branch topic && git checkout -q -b other
		echo other > other.txt && git add other.txt && git commit -q -m other
		git checkout -q topic && git rebase -q other
		git checkout -q "$BRANCH" && git merge -q --ff-only topic
		git gc -q --prune=now --aggressive
		git fsck --no-progress
		git log --format=%s | head -4
	`
	cmd := exec.CommandContext(testCtx(t), "bash", "-c", script)
	cmd.Dir = in.Dir
	cmd.Env = append(os.Environ(), "BRANCH="+ws.Branch)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git inside: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "other\nreadme\none\nsrc") {
		t.Fatalf("exp the workspace's history, got:\n%s", out)
	}
	wantSameRepo(t, before, snapshotRepo(t, repo))
	// And Record takes it all.
	mustRecord(t, r, ws, in)
	if exp, got := "other", gitT(t, repo, "log", "-1", "--format=%s", "refs/heads/patina/clone-like"); exp != got {
		t.Fatalf("exp %q recorded, got %q", exp, got)
	}
}

func TestInsideState(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ws := mustCreate(t, r, CreateRequest{Name: "state"})
	in := newInside(t, ws)
	st := mustState(t, in)
	if exp := (State{Head: ws.BaseCommit, Branch: ws.Branch, Snapshot: ws.BaseCommit}); st != exp {
		t.Fatalf("exp %+v, got %+v", exp, st)
	}

	writeFile(t, filepath.Join(in.Dir, "untracked.txt"), "u\n")
	writeFile(t, filepath.Join(in.Dir, "ignored.log"), "i\n")
	writeFile(t, filepath.Join(in.Dir, "src", "a.txt"), "changed\n")
	index := readFile(t, filepath.Join(in.Dir, ".git", "index"))
	st = mustState(t, in)
	if !st.Dirty || st.Snapshot == st.Head {
		t.Fatalf("exp dirty, got %+v", st)
	}
	if exp, got := st.Head, gitT(t, in.Dir, "rev-parse", st.Snapshot+"^"); exp != got {
		t.Fatalf("exp the snapshot's parent %s, got %s", exp, got)
	}
	if exp, got := "src/a.txt\nuntracked.txt", gitT(t, in.Dir, "diff", "--name-only", st.Head, st.Snapshot); exp != got {
		t.Fatalf("exp the snapshot to hold %q, got %q", exp, got)
	}
	if index != readFile(t, filepath.Join(in.Dir, ".git", "index")) {
		t.Fatalf("exp the real index untouched")
	}
	if again := mustState(t, in); again != st {
		t.Fatalf("exp the same snapshot for the same work, got %+v and %+v", st, again)
	}
	gitT(t, in.Dir, "checkout", "-q", "--detach")
	if st := mustState(t, in); st.Branch != "" {
		t.Fatalf("exp no branch when detached, got %+v", st)
	}
}

func TestInsideCommit(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ctx := testCtx(t)
	ws := mustCreate(t, r, CreateRequest{Name: "commit"})
	in := newInside(t, ws)
	res, err := in.Commit(ctx, CommitRequest{})
	if err != nil || res.Committed || res.Commit != ws.BaseCommit {
		t.Fatalf("exp nothing to commit, got %+v, %v", res, err)
	}
	writeFile(t, filepath.Join(in.Dir, "new.txt"), "new\n")
	writeFile(t, filepath.Join(in.Dir, "skip.log"), "ignored\n")
	if err := os.Remove(filepath.Join(in.Dir, "src", "b.txt")); err != nil {
		t.Fatal(err)
	}
	res, err = in.Commit(ctx, CommitRequest{Author: &Signature{Name: "Someone", Email: "someone@example.com"}})
	if err != nil || !res.Committed {
		t.Fatalf("exp a commit, got %+v, %v", res, err)
	}
	if exp, got := "Someone <someone@example.com>|patina <patina@localhost>|patina: changes in the workspace", gitT(t, in.Dir, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%s"); exp != got {
		t.Fatalf("exp %q, got %q", exp, got)
	}
	if exp, got := "A\tnew.txt\nD\tsrc/b.txt", gitT(t, in.Dir, "diff", "--name-status", "HEAD~1", "HEAD"); exp != got {
		t.Fatalf("exp %q, got %q", exp, got)
	}
	if _, err := in.Commit(ctx, CommitRequest{Author: &Signature{Name: "x<y>", Email: "e"}}); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("exp a bad author refused, got %v", err)
	}
}

func TestInsidePack(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ctx := testCtx(t)
	ws := mustCreate(t, r, CreateRequest{Name: "pack"})
	in := newInside(t, ws)
	c := agentCommitNoRecord(t, in, map[string]string{"p.txt": "p\n"})
	var b bytes.Buffer
	// A have the workspace does not know is left out, not an error.
	if err := in.Pack(ctx, []string{c}, []string{ws.BaseCommit, strings.Repeat("2", 40)}, &b); err != nil {
		t.Fatal(err)
	}
	if n, err := parsePackHeader(b.Bytes()); err != nil || n != 3 {
		t.Fatalf("exp a pack of the commit, its tree and blob, got %d, %v", n, err)
	}
	for _, bad := range [][]string{{"HEAD"}, {"--all"}, nil} {
		if err := in.Pack(ctx, bad, nil, &b); err == nil {
			t.Errorf("exp want %q refused", bad)
		}
	}
	// A writer that gives up stops git.
	if err := in.Pack(ctx, []string{c}, nil, failWriter{}); err == nil {
		t.Errorf("exp the writer's error")
	}
}

// agentCommitNoRecord commits files inside without recording.
func agentCommitNoRecord(t *testing.T, in *Inside, files map[string]string) string {
	t.Helper()
	for p, c := range files {
		writeFile(t, filepath.Join(in.Dir, p), c)
	}
	res, err := in.Commit(testCtx(t), CommitRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return res.Commit
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, os.ErrClosed }

// Reseed leaves a sound repository alone and makes a broken one (branch
// deleted and objects pruned; .git removed) again at the base, the files
// kept, so their changes show against the base.
func TestInsideReseed(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ctx := testCtx(t)
	ws := mustCreate(t, r, CreateRequest{Name: "reseed"})
	in := newInside(t, ws)
	dir := in.Dir
	req := InitRequest{Branch: ws.Branch, Base: ws.BaseCommit, Alternates: ws.ObjectDirs, Reseed: true}

	writeFile(t, filepath.Join(dir, "kept.txt"), "kept\n")
	gitT(t, dir, "add", "kept.txt")
	gitT(t, dir, "commit", "-q", "-m", "inner")
	head := gitT(t, dir, "rev-parse", "HEAD")
	if res, err := in.Init(ctx, req); err != nil || res.Created || res.Head != head {
		t.Fatalf("exp a sound repository left alone at %s, got %+v %v", head, res, err)
	}

	for name, breakIt := range map[string]func(){
		"branch deleted, pruned": func() {
			gitT(t, dir, "update-ref", "-d", "refs/heads/"+ws.Branch)
			gitT(t, dir, "reflog", "expire", "--expire=now", "--all")
			gitT(t, dir, "gc", "-q", "--prune=now")
		},
		"rm -rf .git": func() {
			if err := os.RemoveAll(filepath.Join(dir, ".git")); err != nil {
				t.Fatal(err)
			}
		},
	} {
		breakIt()
		res, err := in.Init(ctx, req)
		if err != nil || !res.Created || res.Head != ws.BaseCommit {
			t.Fatalf("%s: exp a new repository at the base, got %+v %v", name, res, err)
		}
		if exp, got := "?? kept.txt", gitT(t, dir, "status", "--porcelain"); exp != got {
			t.Fatalf("%s: exp the file kept as a change, got %q", name, got)
		}
		// Back to a commit for the next case.
		gitT(t, dir, "add", "kept.txt")
		gitT(t, dir, "commit", "-q", "-m", "again")
	}
}
