package worktree

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// gitRSS is a log handler that keeps the peak resident memory the runner
// logs for each git subcommand.
type gitRSS struct {
	mu   sync.Mutex
	peak map[string]int64
}

func newGitRSS() *gitRSS { return &gitRSS{peak: map[string]int64{}} }

func (h *gitRSS) Enabled(context.Context, slog.Level) bool { return true }
func (h *gitRSS) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *gitRSS) WithGroup(string) slog.Handler            { return h }

func (h *gitRSS) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "git" {
		return nil
	}
	var cmd string
	var rss int64
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "args":
			if args, ok := a.Value.Any().([]string); ok && len(args) > 0 {
				cmd = args[0]
			}
		case "max_rss":
			rss = a.Value.Int64()
		}
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	h.peak[cmd] = max(h.peak[cmd], rss)
	return nil
}

// max is the largest peak of any git command, and which.
func (h *gitRSS) max() (string, int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var cmd string
	var rss int64
	for c, n := range h.peak {
		if n > rss {
			cmd, rss = c, n
		}
	}
	return cmd, rss
}

func requireLinux(t testing.TB) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("git's limits and peak memory are measured on Linux only")
	}
}

// The delta bomb seen at main (a 16 KB pack, one 16 MiB blob and deltas
// each making 4 GiB of it) costs Record, Diff and Apply little: refused
// with the limit named, in well under a second, with git's peak memory a
// few MiB, and the user's repository as it was. At main, index-pack
// reached 4.2 GB for 35 s (six deltas: 1.07 GB).
func TestDeltaBombRefusedCheaply(t *testing.T) {
	t.Parallel()
	requireLinux(t)
	repo := newUserRepo(t)
	rss := newGitRSS()
	r, err := Open(testCtx(t), Config{StateDir: t.TempDir(), Logger: slog.New(rss)}, repo)
	if err != nil {
		t.Fatal(err)
	}
	ws := mustCreate(t, r, CreateRequest{Name: "bomb"})
	in := newInside(t, ws)
	writeFile(t, filepath.Join(in.Dir, "a.txt"), "a\n")
	c, err := in.Commit(testCtx(t), CommitRequest{})
	if err != nil {
		t.Fatal(err)
	}
	before := snapshotRepo(t, repo)
	for _, deltas := range []int{1, 6} {
		src := bytesSource(deltaBomb(t, 20, deltas))
		for name, op := range map[string]func(context.Context) error{
			"record": func(ctx context.Context) error {
				_, err := r.Record(ctx, "bomb", RecordRequest{Head: c.Commit, Source: src})
				return err
			},
			"diff": func(ctx context.Context) error {
				_, err := r.Diff(ctx, "bomb", DiffRequest{Head: c.Commit, Source: src})
				return err
			},
			"apply": func(ctx context.Context) error {
				_, err := r.Apply(ctx, "bomb", ApplyRequest{Snapshot: c.Commit, Source: src})
				return err
			},
		} {
			start := time.Now()
			err := op(testCtx(t))
			took := time.Since(start)
			wantErr(t, err, ErrTooLarge)
			if !strings.Contains(err.Error(), "4 GiB") || !strings.Contains(err.Error(), "over patina's limit of 512 MiB") {
				t.Fatalf("%s: exp the error to name the object's size and the limit, got %q", name, err)
			}
			if took > time.Second {
				t.Errorf("%s (%d deltas): refused after %v, exp under a second", name, deltas, took)
			}
			t.Logf("%s (%d deltas): %v in %v", name, deltas, err, took.Round(time.Millisecond))
		}
	}
	cmd, peak := rss.max()
	t.Logf("git's peak memory: %d MiB (%s)", peak>>20, cmd)
	if peak > 64<<20 {
		t.Fatalf("exp host git to stay under 64 MiB, git %s reached %d MiB", cmd, peak>>20)
	}
	wantSameRepo(t, before, snapshotRepo(t, repo))
}

// A git over the memory limit fails with ErrTooLarge naming the limit:
// here index-pack must hold a 48 MiB blob under a 32 MiB limit. The same
// pack passes under the default limit.
func TestGitMemoryLimit(t *testing.T) {
	t.Parallel()
	requireLinux(t)
	repo := newUserRepo(t)
	ws := mustCreate(t, openRepo(t, repo), CreateRequest{Name: "big"})
	in := newInside(t, ws)
	big := bytes.Repeat([]byte("0123456789abcdef\n"), 3<<20) // 51 MB of text, 200 KB packed
	writeFile(t, filepath.Join(in.Dir, "big.txt"), string(big))
	c, err := in.Commit(testCtx(t), CommitRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var pack bytes.Buffer
	if err := in.Pack(testCtx(t), []string{c.Commit}, []string{ws.BaseCommit}, &pack); err != nil {
		t.Fatal(err)
	}
	before := snapshotRepo(t, repo)
	small, err := Open(testCtx(t), Config{StateDir: t.TempDir(), Logger: testLogger(t), GitMemoryBytes: 32 << 20}, repo)
	if err != nil {
		t.Fatal(err)
	}
	_, err = small.Diff(testCtx(t), "big", DiffRequest{Head: c.Commit, Source: bytesSource(pack.Bytes())})
	wantErr(t, err, ErrTooLarge)
	if !strings.Contains(err.Error(), "needed more memory than patina's limit of 32 MiB") {
		t.Fatalf("exp the memory limit named, got %q", err)
	}
	t.Logf("refused: %.300s", err)
	wantSameRepo(t, before, snapshotRepo(t, repo))

	rss := newGitRSS()
	r, err := Open(testCtx(t), Config{StateDir: t.TempDir(), Logger: slog.New(rss)}, repo)
	if err != nil {
		t.Fatal(err)
	}
	d, err := r.Diff(testCtx(t), "big", DiffRequest{Head: c.Commit, Source: bytesSource(pack.Bytes())})
	if err != nil || len(d.Files) != 1 {
		t.Fatalf("exp the diff under the default limits, got %+v, %v", d.Files, err)
	}
	cmd, peak := rss.max()
	t.Logf("under the default limits: git's peak %d MiB (%s)", peak>>20, cmd)
}

// A git over the CPU limit is stopped and the call fails with ErrTooLarge
// naming the limit. The git here is a script that spins on anything but
// `git version`.
func TestGitCPULimit(t *testing.T) {
	t.Parallel()
	requireLinux(t)
	repo := newUserRepo(t)
	spin := filepath.Join(tempDir(t), "git")
	script := "#!/bin/sh\ncase \"$*\" in *version*) exec git \"$@\";; *rev-parse*) exec git \"$@\";; esac\nwhile :; do :; done\n"
	if err := os.WriteFile(spin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := Open(testCtx(t), Config{StateDir: t.TempDir(), Logger: testLogger(t), GitPath: spin, GitCPUTime: time.Second}, repo)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = r.List(testCtx(t))
	wantErr(t, err, ErrTooLarge)
	if !strings.Contains(err.Error(), "more than patina's limit of 1s of CPU time") {
		t.Fatalf("exp the CPU limit named, got %q", err)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("exp the spinning git stopped after about a second of CPU, took %v", took)
	}
	t.Logf("refused: %v", err)
}
