package worktree

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
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
	full := append([]string{"-c", "user.name=Test User", "-c", "user.email=test@example.com", "-c", "init.defaultBranch=main"}, args...)
	cmd := exec.Command("git", full...)
	cmd.Dir = dir
	// Like patina, never let a status refresh rewrite the index, so index
	// checksums compare.
	cmd.Env = append(os.Environ(), "GIT_OPTIONAL_LOCKS=0")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return strings.TrimRight(string(out), "\n"), errors.New(err.Error() + ": " + stderr.String())
	}
	return strings.TrimRight(string(out), "\n"), nil
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
	r, err := Open(context.Background(), Config{StateDir: stateDir, Logger: testLogger(t)}, dir)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return r
}

func mustCreate(t *testing.T, r *Repo, req CreateRequest) Workspace {
	t.Helper()
	ws, err := r.Create(context.Background(), req)
	if err != nil {
		t.Fatalf("Create(%+v): %v", req, err)
	}
	return ws
}

func mustGet(t *testing.T, r *Repo, name string) Workspace {
	t.Helper()
	ws, err := r.Get(context.Background(), name)
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
