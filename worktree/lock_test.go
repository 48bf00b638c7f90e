//go:build unix

package worktree

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Another process holding the repository's lock file (simulated by a
// separate open file description, which flock treats the same) blocks
// patina's writes until it lets go; the caller's context bounds the wait.
func TestLockAcrossProcesses(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	mustCreate(t, r, CreateRequest{Name: "locked"})

	f, err := os.OpenFile(filepath.Join(r.GitCommonDir(), lockFile), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(testCtx(t), 100*time.Millisecond)
	defer cancel()
	err = r.AppendLog(ctx, "locked", Event{Kind: "blocked"})
	wantErr(t, err, context.DeadlineExceeded)

	// Reads do not wait for the lock.
	if _, err := r.List(testCtx(t)); err != nil {
		t.Fatal(err)
	}

	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	if err := r.AppendLog(testCtx(t), "locked", Event{Kind: "unblocked"}); err != nil {
		t.Fatal(err)
	}
}
