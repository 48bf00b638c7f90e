package worktree

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	// Keep the machine's git config out of the tests; the runner passes
	// these two through.
	os.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	os.Exit(m.Run())
}

// gitT runs git as a user would (hooks and all) and returns trimmed stdout.
func gitT(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := gitTry(dir, args...)
	if err != nil {
		t.Fatalf("git %s in %s: %v", strings.Join(args, " "), dir, err)
	}
	return out
}

// gitTry is gitT without failing the test.
func gitTry(dir string, args ...string) (string, error) {
	return gitTryEnvIn(dir, nil, "", args...)
}

// gitTryEnvIn is gitTry with more environment and standard input.
func gitTryEnvIn(dir string, env []string, stdin string, args ...string) (string, error) {
	out, err := gitRawIn(dir, env, stdin, args...)
	return strings.TrimRight(string(out), "\n"), err
}

// gitRawIn is gitTryEnvIn with git's output as it came: for binary output
// (a pack), whose last byte may be a newline.
func gitRawIn(dir string, env []string, stdin string, args ...string) ([]byte, error) {
	full := append([]string{"-c", "user.name=Test User", "-c", "user.email=test@example.com", "-c", "init.defaultBranch=main"}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", full...)
	cmd.Dir = dir
	// Like patina, never let a status refresh rewrite the index, so index
	// checksums compare.
	cmd.Env = append(append(os.Environ(), "GIT_OPTIONAL_LOCKS=0"), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, errors.New(err.Error() + ": " + stderr.String())
	}
	return out, nil
}

// newUserRepo makes a repository with two commits on main:
// README.md, src/a.txt and src/b.txt; .gitignore ignores *.log.
func newUserRepo(t *testing.T) string {
	t.Helper()
	dir := tempDir(t)
	gitT(t, dir, "init", "-q", "-b", "main")
	writeFile(t, filepath.Join(dir, "README.md"), "# demo\n\nline 1\nline 2\nline 3\n")
	writeFile(t, filepath.Join(dir, ".gitignore"), "*.log\n")
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", "init")
	writeFile(t, filepath.Join(dir, "src", "a.txt"), "alpha\n")
	writeFile(t, filepath.Join(dir, "src", "b.txt"), "bravo\n")
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", "src")
	return dir
}

// tempDir is t.TempDir with symlinks resolved (macOS's /var), as patina
// reports paths.
func tempDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// openRepo opens dir with a fresh state dir.
func openRepo(t *testing.T, dir string) *Repo {
	t.Helper()
	return openRepoState(t, dir, t.TempDir())
}

func openRepoState(t *testing.T, dir, stateDir string) *Repo {
	t.Helper()
	r, err := Open(testCtx(t), Config{StateDir: stateDir, Logger: testLogger(t)}, dir)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return r
}

// testTimeout bounds every test's git calls: nothing may hang.
const testTimeout = 2 * time.Minute

// testCtx is a context with a deadline, cancelled when the test ends.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func mustCreate(t *testing.T, r *Repo, req CreateRequest) Workspace {
	t.Helper()
	ws, err := r.Create(testCtx(t), req)
	if err != nil {
		t.Fatalf("Create(%+v): %v", req, err)
	}
	return ws
}

func mustGet(t *testing.T, r *Repo, name string) Workspace {
	t.Helper()
	ws, err := r.Get(testCtx(t), name)
	if err != nil {
		t.Fatalf("Get(%s): %v", name, err)
	}
	return ws
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func wantErr(t *testing.T, err, exp error) {
	t.Helper()
	if !errors.Is(err, exp) {
		t.Fatalf("exp error %v, got %v", exp, err)
	}
}

// userState is everything of a working tree the user could notice: status,
// HEAD, branch tips, the index file's bytes and every file's content.
type userState struct {
	Status   string
	Head     string
	Refs     string
	Index    string
	Files    map[string]string
	GitFiles []string // MERGE_HEAD and friends
}

func snapshotUser(t *testing.T, dir string) userState {
	t.Helper()
	s := userState{
		Status: gitT(t, dir, "status", "--porcelain=v1", "--untracked-files=all"),
		Head:   gitT(t, dir, "rev-parse", "HEAD"),
		Refs:   userRefs(t, dir),
		Files:  map[string]string{},
	}
	sym, _ := gitTry(dir, "symbolic-ref", "-q", "HEAD")
	s.Head += " " + sym
	gitDir := gitT(t, dir, "rev-parse", "--absolute-git-dir")
	idx, err := os.ReadFile(filepath.Join(gitDir, "index"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(idx)
	s.Index = hex.EncodeToString(sum[:])
	for _, f := range []string{"MERGE_HEAD", "ORIG_HEAD", "CHERRY_PICK_HEAD", "rebase-merge", "AUTO_MERGE"} {
		if _, err := os.Lstat(filepath.Join(gitDir, f)); err == nil {
			s.GitFiles = append(s.GitFiles, f)
		}
	}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		s.Files[rel] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// userRefs lists the user's branches and tags (patina's own branches and
// notes excluded).
func userRefs(t *testing.T, dir string) string {
	t.Helper()
	var refs []string
	for _, line := range strings.Split(gitT(t, dir, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/", "refs/tags/"), "\n") {
		if !strings.HasPrefix(line, "refs/heads/"+BranchPrefix) {
			refs = append(refs, line)
		}
	}
	return strings.Join(refs, "\n")
}

func wantSameUser(t *testing.T, before, after userState) {
	t.Helper()
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("user's repository changed:\nexp %+v\ngot %+v", before, after)
	}
}

// agentIdentity is who commits inside test workspaces.
var agentIdentity = Signature{Name: "Agent", Email: "agent@example.com"}

// newInside simulates ws's container: a directory of its own, made a
// repository by Inside.Init with the user's objects as alternates.
func newInside(t *testing.T, ws Workspace) *Inside {
	t.Helper()
	in := &Inside{Dir: filepath.Join(tempDir(t), "workspace"), Logger: testLogger(t)}
	if _, err := in.Init(testCtx(t), InitRequest{Branch: ws.Branch, Base: ws.BaseCommit, Alternates: ws.ObjectDirs, Identity: &agentIdentity}); err != nil {
		t.Fatalf("Init: %v", err)
	}
	return in
}

// insideSource is the Source the sidecar builds over the agent: here it
// calls Inside.Pack directly.
type insideSource struct{ in *Inside }

func (s insideSource) Pack(ctx context.Context, want, have []string) (io.ReadCloser, error) {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(s.in.Pack(ctx, want, have, pw)) }()
	return pr, nil
}

// agentCommit writes files in a workspace, commits them inside with
// Inside.Commit and records the new HEAD. It returns the commit.
func agentCommit(t *testing.T, r *Repo, ws Workspace, in *Inside, files map[string]string) string {
	t.Helper()
	for p, c := range files {
		writeFile(t, filepath.Join(in.Dir, p), c)
	}
	res, err := in.Commit(testCtx(t), CommitRequest{Message: "agent work"})
	if err != nil || !res.Committed {
		t.Fatalf("commit in %s: %+v, %v", ws.Name, res, err)
	}
	mustRecord(t, r, ws, in)
	return res.Commit
}

// mustRecord records the workspace's HEAD.
func mustRecord(t *testing.T, r *Repo, ws Workspace, in *Inside) RecordResult {
	t.Helper()
	ctx := testCtx(t)
	st, err := in.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Record(ctx, ws.Name, RecordRequest{Head: st.Head, Source: insideSource{in}})
	if err != nil {
		t.Fatalf("Record(%s): %v", st.Head, err)
	}
	return res
}

// mustState is in.State.
func mustState(t *testing.T, in *Inside) State {
	t.Helper()
	st, err := in.State(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// diffOf diffs what is in the workspace now: HEAD and a snapshot.
func diffOf(t *testing.T, r *Repo, ws Workspace, in *Inside) Diff {
	t.Helper()
	st := mustState(t, in)
	d, err := r.Diff(testCtx(t), ws.Name, DiffRequest{Head: st.Head, Snapshot: st.Snapshot, Source: insideSource{in}})
	if err != nil {
		t.Fatalf("Diff: %v", err)
	}
	return d
}

// userCommit commits files on the user's checked-out branch.
func userCommit(t *testing.T, repo string, files map[string]string) string {
	t.Helper()
	for p, c := range files {
		writeFile(t, filepath.Join(repo, p), c)
		gitT(t, repo, "add", p)
	}
	gitT(t, repo, "commit", "-q", "-m", "user work")
	return gitT(t, repo, "rev-parse", "HEAD")
}

// repoState is everything of the user's repository a workspace must not
// change: every ref, the config, the hooks, the set of object files, and
// whether git fsck --full is clean.
type repoState struct {
	Refs    string
	Config  string
	Hooks   map[string]string
	Objects []string
	Fsck    string
}

// snapshotRepo reads repoState; refs matching skip (prefixes) are left out.
func snapshotRepo(t *testing.T, repo string, skip ...string) repoState {
	t.Helper()
	common := gitT(t, repo, "rev-parse", "--path-format=absolute", "--git-common-dir")
	s := repoState{Hooks: map[string]string{}}
	var refs []string
	for _, line := range strings.Split(gitT(t, repo, "for-each-ref", "--format=%(refname) %(objectname) %(symref)"), "\n") {
		keep := true
		for _, p := range skip {
			keep = keep && !strings.HasPrefix(line, p)
		}
		if keep {
			refs = append(refs, line)
		}
	}
	s.Refs = strings.Join(refs, "\n") + "\nHEAD " + readFile(t, filepath.Join(common, "HEAD"))
	s.Config = readFile(t, filepath.Join(common, "config"))
	hooks, _ := os.ReadDir(filepath.Join(common, "hooks"))
	for _, h := range hooks {
		b, _ := os.ReadFile(filepath.Join(common, "hooks", h.Name()))
		s.Hooks[h.Name()] = string(b)
	}
	objects := filepath.Join(common, "objects")
	err := filepath.WalkDir(objects, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(objects, p)
		if !d.IsDir() {
			s.Objects = append(s.Objects, rel)
		} else if strings.HasPrefix(d.Name(), quarantinePrefix) {
			s.Objects = append(s.Objects, rel+"/")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(s.Objects)
	if out, err := gitTry(repo, "fsck", "--full", "--strict", "--no-progress", "--no-dangling"); err != nil {
		s.Fsck = "fsck failed: " + err.Error() + out
	}
	return s
}

func wantSameRepo(t *testing.T, before, after repoState) {
	t.Helper()
	if after.Fsck != "" {
		t.Fatalf("user's repository broken: %s", after.Fsck)
	}
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("user's repository changed:\nexp %+v\ngot %+v", before, after)
	}
}
