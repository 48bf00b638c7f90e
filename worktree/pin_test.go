package worktree

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// What a workspace can write (its worktree's .git file, its own admin dir's
// commondir file) never sends patina's git to a repository made inside the
// workspace: a filter driver configured there does not run on the host,
// and Diff and Commit still work on the real repository.
func TestGitPinnedToRepository(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ctx := context.Background()
	ws := mustCreate(t, r, CreateRequest{Name: "pinned"})
	if ws.GitDir != filepath.Join(r.GitCommonDir(), "worktrees", "pinned") {
		t.Fatalf("exp the worktree's git dir under the common dir, got %q", ws.GitDir)
	}

	// A repository planted in the worktree, with a filter that leaves a
	// marker when git runs it.
	marker := filepath.Join(t.TempDir(), "HOST_MARKER")
	evil := filepath.Join(ws.Path, ".evil")
	gitT(t, ws.Path, "init", "-q", "--bare", evil)
	gitT(t, evil, "config", "filter.pw.clean", "sh -c 'touch "+marker+"; cat'")
	if err := os.MkdirAll(filepath.Join(evil, "worktrees", "pinned"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ws.Path, ".gitattributes"), "*.pw filter=pw\n")
	writeFile(t, filepath.Join(ws.Path, "t.pw"), "data\n")
	writeFile(t, filepath.Join(ws.Path, ".git"), "gitdir: "+evil+"\n")
	writeFile(t, filepath.Join(ws.GitDir, "commondir"), evil+"\n")

	d, err := r.Diff(ctx, "pinned")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.Text, "+data") {
		t.Fatalf("exp the diff of the real repository, got %q", d.Text)
	}
	if _, err := r.Commit(ctx, "pinned", CommitRequest{Message: "work"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a filter configured inside the workspace ran on the host")
	}
	if got := gitT(t, repo, "show", "--format=%s", "-s", "patina/pinned"); got != "work" {
		t.Fatalf("exp the commit on the workspace branch of the real repository, got %q", got)
	}
}

// A worktree directory git knows nothing about is refused, not guessed.
func TestAdminDirUnknown(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	_, err := r.adminDir(filepath.Join(r.wtRoot, "nosuch"))
	if !errors.Is(err, ErrMissing) {
		t.Fatalf("exp ErrMissing, got %v", err)
	}
}
