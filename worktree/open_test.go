package worktree

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestOpen(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	state := tempDir(t)
	for _, p := range []string{repo, filepath.Join(repo, "src"), filepath.Join(repo, "src", "a.txt"), filepath.Join(repo, ".git")} {
		r := openRepoState(t, p, state)
		if exp, got := repo, r.Root(); exp != got {
			t.Errorf("Open(%s): exp root %s, got %s", p, exp, got)
		}
		if exp, got := filepath.Join(repo, ".git"), r.GitCommonDir(); exp != got {
			t.Errorf("Open(%s): exp common dir %s, got %s", p, exp, got)
		}
		if exp, got := []string{filepath.Join(repo, ".git", "objects")}, r.ObjectDirs(); !reflect.DeepEqual(exp, got) {
			t.Errorf("Open(%s): exp object dirs %q, got %q", p, exp, got)
		}
		if !strings.HasPrefix(r.WorktreesDir(), filepath.Join(state, "worktrees")+string(filepath.Separator)) {
			t.Errorf("Open(%s): exp worktrees dir under %s, got %s", p, state, r.WorktreesDir())
		}
	}
	a, b := openRepoState(t, repo, state), openRepoState(t, repo, state)
	if a.WorktreesDir() != b.WorktreesDir() {
		t.Errorf("exp a stable repo key, got %s and %s", a.WorktreesDir(), b.WorktreesDir())
	}
	other := openRepoState(t, newUserRepo(t), state)
	if a.WorktreesDir() == other.WorktreesDir() {
		t.Errorf("exp distinct repo keys for distinct repositories, got %s twice", a.WorktreesDir())
	}
}

func TestOpenFromLinkedWorktree(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	linked := filepath.Join(tempDir(t), "linked")
	gitT(t, repo, "worktree", "add", "-q", "-b", "side", linked)
	r := openRepo(t, linked)
	if exp, got := repo, r.Root(); exp != got {
		t.Fatalf("exp the main working tree %s, got %s", exp, got)
	}
}

func TestOpenRefuses(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	cfg := Config{StateDir: t.TempDir(), Logger: testLogger(t)}

	_, err := Open(ctx, cfg, t.TempDir())
	wantErr(t, err, ErrNotFound)

	_, err = Open(ctx, cfg, filepath.Join(t.TempDir(), "does-not-exist"))
	wantErr(t, err, ErrNotFound)

	bare := t.TempDir()
	gitT(t, bare, "init", "-q", "--bare")
	_, err = Open(ctx, cfg, bare)
	wantErr(t, err, ErrUnsupported)
	if !strings.Contains(err.Error(), "bare") {
		t.Errorf("exp the message to say bare, got %q", err)
	}

	repo := newUserRepo(t)
	_, err = Open(ctx, Config{StateDir: filepath.Join(repo, ".patina"), Logger: testLogger(t)}, repo)
	wantErr(t, err, ErrUnsupported)
	if !strings.Contains(err.Error(), "inside the repository") {
		t.Errorf("exp the message to say why, got %q", err)
	}

	_, err = Open(ctx, Config{StateDir: t.TempDir(), Author: Signature{Name: "x<y>", Email: "e"}}, repo)
	wantErr(t, err, ErrInvalidName)
}

func TestOpenDefaults(t *testing.T) {
	state := tempDir(t)
	t.Setenv("XDG_STATE_HOME", state)
	repo := newUserRepo(t)
	r, err := Open(testCtx(t), Config{}, repo)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.WorktreesDir(), filepath.Join(state, "patina", "worktrees")) {
		t.Errorf("exp worktrees under $XDG_STATE_HOME/patina, got %s", r.WorktreesDir())
	}
	if exp, got := DefaultAuthor, r.cfg.Author; exp != got {
		t.Errorf("exp author %v, got %v", exp, got)
	}
	if r.cfg.Logger == nil || r.cfg.GitPath == "" || r.cfg.MaxPackBytes != 2<<30 || r.cfg.MaxObjectBytes != 8<<30 ||
		r.cfg.MaxSingleObjectBytes != 512<<20 || r.cfg.GitMemoryBytes != 4<<30 || r.cfg.GitCPUTime != 10*time.Minute {
		t.Errorf("exp logger, git path and limits filled in, got %+v", r.cfg)
	}
	if exp, got := (procLimits{memory: 4 << 30, cpu: 10 * time.Minute}), r.git.limits; exp != got {
		t.Errorf("exp host git limited to %v, got %v", exp, got)
	}
}

// Limits: the per-object one is no more than the total; negative OS
// limits are none.
func TestConfigLimits(t *testing.T) {
	c, err := Config{StateDir: t.TempDir(), MaxObjectBytes: 1 << 20, GitMemoryBytes: -1, GitCPUTime: -1}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxSingleObjectBytes != 1<<20 || c.GitMemoryBytes != 0 || c.GitCPUTime != 0 {
		t.Errorf("exp a 1 MiB object limit and no OS limits, got %+v", c)
	}
	if (procLimits{memory: c.GitMemoryBytes, cpu: c.GitCPUTime}).on() {
		t.Error("exp no limits on")
	}
}

func TestCreateInEmptyRepo(t *testing.T) {
	t.Parallel()
	repo := t.TempDir()
	gitT(t, repo, "init", "-q", "-b", "main")
	r := openRepo(t, repo)
	_, err := r.Create(testCtx(t), CreateRequest{Name: "first"})
	wantErr(t, err, ErrUnsupported)
	if !strings.Contains(err.Error(), "no commits") {
		t.Errorf("exp the message to say there are no commits, got %q", err)
	}
}

// The object directories a workspace borrows from include the
// repository's own alternates, recursively, that exist.
func TestObjectDirsFollowAlternates(t *testing.T) {
	t.Parallel()
	lender := newUserRepo(t)
	second := newUserRepo(t)
	repo := tempDir(t)
	gitT(t, repo, "clone", "-q", "--shared", lender, ".")
	alternates := filepath.Join(repo, ".git", "objects", "info", "alternates")
	lenderObjects := filepath.Join(lender, ".git", "objects")
	secondObjects := filepath.Join(second, ".git", "objects")
	writeFile(t, filepath.Join(lenderObjects, "info", "alternates"), "# a comment\n"+secondObjects+"\n")
	writeFile(t, alternates, lenderObjects+"\n\n/does/not/exist\n\"../../../"+filepath.Base(second)+"/.git/objects\"\n")
	r := openRepo(t, repo)
	exp := []string{filepath.Join(repo, ".git", "objects"), lenderObjects, secondObjects}
	if got := r.ObjectDirs(); !reflect.DeepEqual(exp, got) {
		t.Fatalf("exp %q, got %q", exp, got)
	}
}

// A repository whose main working tree holds a symlinked .git file (or
// whose linked worktrees' admin files are hostile) still opens, without
// asking git worktree list.
func TestOpenIgnoresHostileAdminDirs(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	admin := filepath.Join(repo, ".git", "worktrees", "evil")
	if err := os.MkdirAll(admin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscallMkfifo(filepath.Join(admin, "gitdir")); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	r := openRepo(t, repo)
	if exp, got := repo, r.Root(); exp != got {
		t.Fatalf("exp root %s, got %s", exp, got)
	}
	mustCreate(t, r, CreateRequest{Name: "fine"})
}
