package worktree

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestGitEnv(t *testing.T) {
	t.Parallel()
	base := []string{
		"PATH=/usr/bin", "HOME=/home/u",
		"GIT_DIR=/elsewhere/.git", "GIT_WORK_TREE=/elsewhere", "GIT_INDEX_FILE=/tmp/idx",
		"GIT_NOTES_REF=refs/notes/other", "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=core.hooksPath",
		"GIT_CONFIG_GLOBAL=/etc/gg", "GIT_EXEC_PATH=/usr/lib/git-core",
		"LANG=de_DE.UTF-8", "LC_MESSAGES=fr_FR", "PAGER=less", "EDITOR=vim",
	}
	env := gitEnv(base, Signature{Name: "n", Email: "e@x"})
	for _, gone := range []string{"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_NOTES_REF", "GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_0", "LANG", "LC_MESSAGES", "EDITOR"} {
		for _, kv := range env {
			if strings.HasPrefix(kv, gone+"=") {
				t.Errorf("exp %s removed, got %q", gone, kv)
			}
		}
	}
	for _, kept := range []string{"PATH=/usr/bin", "HOME=/home/u", "GIT_CONFIG_GLOBAL=/etc/gg", "GIT_EXEC_PATH=/usr/lib/git-core",
		"LC_ALL=C", "GIT_TERMINAL_PROMPT=0", "GIT_PAGER=cat", "PAGER=cat", "GIT_OPTIONAL_LOCKS=0",
		"GIT_AUTHOR_NAME=n", "GIT_AUTHOR_EMAIL=e@x", "GIT_COMMITTER_NAME=n", "GIT_COMMITTER_EMAIL=e@x"} {
		if !slices.Contains(env, kept) {
			t.Errorf("exp %q in env, got %q", kept, env)
		}
	}
}

// A GIT_DIR leaking from the environment (say, patina run from a hook)
// must not redirect patina to another repository.
func TestLeakedGitDirIgnored(t *testing.T) {
	repo := newUserRepo(t)
	other := newUserRepo(t)
	t.Setenv("GIT_DIR", filepath.Join(other, ".git"))
	t.Setenv("GIT_WORK_TREE", other)
	t.Setenv("GIT_INDEX_FILE", filepath.Join(other, ".git", "index"))
	r := openRepo(t, repo)
	if exp, got := repo, r.Root(); exp != got {
		t.Fatalf("exp root %s, got %s", exp, got)
	}
	ws := mustCreate(t, r, CreateRequest{Name: "leak"})
	if _, err := gitTry(other, "--git-dir", filepath.Join(other, ".git"), "rev-parse", "--verify", "refs/heads/patina/leak"); err == nil {
		t.Fatalf("branch created in the leaked GIT_DIR")
	}
	if exp, got := ws.BaseCommit, gitT(t, repo, "--git-dir", filepath.Join(repo, ".git"), "rev-parse", "refs/heads/patina/leak"); exp != got {
		t.Fatalf("exp branch at %s, got %s", exp, got)
	}
}

func TestGitErrorCarriesExitCodeAndStderr(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	g := newRunner("git", DefaultAuthor, slog.New(slog.DiscardHandler))
	_, err := g.run(context.Background(), gitCmd{dir: dir, args: []string{"rev-parse", "--git-dir"}})
	var ge *GitError
	if !errors.As(err, &ge) {
		t.Fatalf("exp *GitError, got %T %v", err, err)
	}
	if exp, got := 128, ge.ExitCode; exp != got {
		t.Errorf("exp exit code %d, got %d", exp, got)
	}
	if !strings.Contains(ge.Stderr, "fatal:") {
		t.Errorf("exp git's stderr, got %q", ge.Stderr)
	}
	if exp, got := []string{"rev-parse", "--git-dir"}, ge.Args; !slices.Equal(exp, got) {
		t.Errorf("exp args %q, got %q", exp, got)
	}
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("exp not-a-repository classified as ErrNotFound, got %v", err)
	}
	if !strings.Contains(err.Error(), "exit status 128") {
		t.Errorf("exp exit status in message, got %q", err)
	}
}

// Every git call is bounded: captured output stops at its limit (git is
// stopped, the call fails with ErrTooLarge), a stream consumer that has
// read enough stops git without an error.
func TestRunnerBoundsOutput(t *testing.T) {
	t.Parallel()
	g := newRunner("git", DefaultAuthor, slog.New(slog.DiscardHandler))
	ctx := testCtx(t)
	// git hash-object --stdin of a big input prints one line: use
	// cat-file on a repository's pack instead to get lots of output.
	repo := newUserRepo(t)
	big := strings.Repeat("x", 1<<20)
	blob, err := gitTryIn(repo, big, "hash-object", "-w", "--stdin")
	if err != nil {
		t.Fatal(err)
	}
	out, err := g.run(ctx, gitCmd{dir: repo, args: []string{"cat-file", "blob", blob}, limit: 1000})
	wantErr(t, err, ErrTooLarge)
	if len(out) > 1001 {
		t.Fatalf("exp at most the limit captured, got %d bytes", len(out))
	}
	out, err = g.run(ctx, gitCmd{dir: repo, args: []string{"cat-file", "blob", blob}, limit: 2 << 20})
	if err != nil || len(out) != 1<<20 {
		t.Fatalf("exp the whole blob under the limit, got %d bytes, %v", len(out), err)
	}
	start := time.Now()
	var got []byte
	err = g.stream(ctx, gitCmd{dir: repo, args: []string{"cat-file", "blob", blob}}, func(r io.Reader) error {
		got = make([]byte, 10)
		if _, err := io.ReadFull(r, got); err != nil {
			return err
		}
		return errStopped
	})
	if err != nil || string(got) != "xxxxxxxxxx" {
		t.Fatalf("exp 10 bytes and no error, got %q, %v", got, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("exp git stopped at once, took %v", d)
	}
}

func TestRunnerHonoursContext(t *testing.T) {
	t.Parallel()
	g := newRunner("git", DefaultAuthor, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := g.run(ctx, gitCmd{args: []string{"version"}})
	wantErr(t, err, context.Canceled)
}

func TestClassify(t *testing.T) {
	t.Parallel()
	tests := []struct {
		stderr string
		exp    error
	}{
		{"fatal: not a git repository (or any of the parent directories): .git", ErrNotFound},
		{"error: no note found for object 0123abcd.", ErrNotFound},
		{"fatal: ambiguous argument 'x': unknown revision or path not in the working tree.", ErrNotFound},
		{"fatal: Needed a single revision", ErrNotFound},
		{"error: Your local changes to the following files would be overwritten by merge:\n\ta", ErrDirty},
		{"error: The following untracked working tree files would be overwritten by merge:", ErrDirty},
		{"error: Entry 'a' not uptodate. Cannot merge.", ErrDirty},
		{"fatal: Not possible to fast-forward, aborting.", ErrConflict},
		{"fatal: '/x' already exists", ErrExists},
		{"fatal: a branch named 'x' already exists", ErrExists},
		{"fatal: pack exceeds maximum allowed size", ErrTooLarge},
		{"fatal: something else", nil},
		{"", nil},
	}
	for _, tc := range tests {
		if got := classify(tc.stderr); got != tc.exp {
			t.Errorf("classify(%q): exp %v, got %v", tc.stderr, tc.exp, got)
		}
	}
}

func TestParseGitVersion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in           string
		major, minor int
		ok           bool
	}{
		{"git version 2.39.5", 2, 39, true},
		{"git version 2.39.3 (Apple Git-146)", 2, 39, true},
		{"git version 2.45.1.windows.1", 2, 45, true},
		{"git version 3.0", 3, 0, true},
		{"git version x.y", 0, 0, false},
		{"hub version 2.1", 0, 0, false},
		{"", 0, 0, false},
	}
	for _, tc := range tests {
		major, minor, err := parseGitVersion(tc.in)
		if (err == nil) != tc.ok || major != tc.major || minor != tc.minor {
			t.Errorf("parseGitVersion(%q): exp %d.%d ok=%v, got %d.%d %v", tc.in, tc.major, tc.minor, tc.ok, major, minor, err)
		}
	}
}
