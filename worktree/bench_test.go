package worktree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// benchFiles is the size of the repository BenchmarkGitStatus works on.
const benchFiles = 10000

// BenchmarkGitStatus compares `git status` in a workspace made by
// Inside.Init (its own repository, objects borrowed through alternates)
// with the same command in the user's repository it came from. The
// "ratio" sub-benchmark alternates the two and reports workspace/user
// (target: at most 1.5).
//
//	go test -run '^$' -bench GitStatus ./worktree/
func BenchmarkGitStatus(b *testing.B) {
	repo, ws := setupStatusBench(b)
	b.Run("user", func(b *testing.B) {
		for b.Loop() {
			gitStatus(b, repo)
		}
	})
	b.Run("workspace", func(b *testing.B) {
		for b.Loop() {
			gitStatus(b, ws)
		}
	})
	b.Run("ratio", func(b *testing.B) {
		var user, inside time.Duration
		for b.Loop() {
			start := time.Now()
			gitStatus(b, repo)
			user += time.Since(start)
			start = time.Now()
			gitStatus(b, ws)
			inside += time.Since(start)
		}
		b.ReportMetric(float64(inside)/float64(user), "workspace/user")
		b.ReportMetric(float64(user.Microseconds())/float64(b.N)/1000, "user-ms/op")
		b.ReportMetric(float64(inside.Microseconds())/float64(b.N)/1000, "workspace-ms/op")
	})
}

// setupStatusBench makes a user repository of benchFiles files and a
// workspace of it, both with a refreshed index.
func setupStatusBench(b *testing.B) (repo, ws string) {
	b.Helper()
	os.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	repo = filepath.Join(b.TempDir(), "user")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		b.Fatal(err)
	}
	benchGit(b, repo, "init", "-q", "-b", "main")
	for i := range benchFiles {
		p := filepath.Join(repo, fmt.Sprintf("dir%03d", i/100), fmt.Sprintf("file%05d.txt", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(fmt.Sprintf("file %d\n", i)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	benchGit(b, repo, "add", "-A")
	benchGit(b, repo, "commit", "-q", "-m", "10k files")
	ctx := context.Background()
	r, err := Open(ctx, Config{StateDir: b.TempDir()}, repo)
	if err != nil {
		b.Fatal(err)
	}
	w, err := r.Create(ctx, CreateRequest{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	in := &Inside{Dir: filepath.Join(b.TempDir(), "workspace")}
	if _, err := in.Init(ctx, InitRequest{Branch: w.Branch, Base: w.BaseCommit, Alternates: w.ObjectDirs}); err != nil {
		b.Fatal(err)
	}
	// Past the racy-clean second, then one status each to refresh the
	// indexes, as an agent's first status would.
	time.Sleep(1100 * time.Millisecond)
	gitStatus(b, repo)
	gitStatus(b, in.Dir)
	return repo, in.Dir
}

func benchGit(b *testing.B, dir string, args ...string) {
	b.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=B", "-c", "user.email=b@example.com"}, args...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// gitStatus runs `git status` as an agent would (porcelain, so the output
// is the same work either way).
func gitStatus(b *testing.B, dir string) {
	b.Helper()
	cmd := exec.Command("git", "status", "--porcelain")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil || len(out) != 0 {
		b.Fatalf("git status in %s: %v %q", dir, err, out)
	}
}

// BenchmarkDeltaBomb is the acceptance figure for a workspace's delta
// bomb (a 16 KB pack, one 16 MiB blob and a delta making 4 GiB of it):
// the time Record takes to refuse it and the peak resident memory of the
// git it runs (target: under a second, at most 64 MB; at main 35 s and
// 4.2 GB).
//
//	go test -run '^$' -bench DeltaBomb ./worktree/
func BenchmarkDeltaBomb(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("peak memory is read from /proc")
	}
	os.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	repo := filepath.Join(b.TempDir(), "user")
	os.MkdirAll(repo, 0o755)
	benchGit(b, repo, "init", "-q", "-b", "main")
	benchGit(b, repo, "commit", "-q", "--allow-empty", "-m", "empty")
	ctx := context.Background()
	r, err := Open(ctx, Config{StateDir: b.TempDir()}, repo)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := r.Create(ctx, CreateRequest{Name: "bomb"}); err != nil {
		b.Fatal(err)
	}
	src := bytesSource(deltaBomb(b, 20, 1))
	head := strings.Repeat("1", 40)
	rss := watchGit(b, r.root)
	for b.Loop() {
		if _, err := r.Record(ctx, "bomb", RecordRequest{Head: head, Source: src}); !errors.Is(err, ErrTooLarge) {
			b.Fatalf("exp ErrTooLarge, got %v", err)
		}
	}
	_, peak := rss.Stop()
	b.ReportMetric(float64(peak)/1e6, "git-peak-MB")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/refusal")
}

// BenchmarkScanPack measures the pack scanner on a pack git makes of a
// repository of text with deltas (throughput in the pack's bytes), and
// reports its time over index-pack's on the same pack: the scanner runs
// beside index-pack as the pack flows, so this is its CPU cost, not added
// wall time unless the machine has one CPU.
//
//	go test -run '^$' -bench ScanPack ./worktree/
func BenchmarkScanPack(b *testing.B) {
	os.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	dir := filepath.Join(b.TempDir(), "src")
	os.MkdirAll(dir, 0o755)
	benchGit(b, dir, "init", "-q", "-b", "main")
	rng := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields("the quick brown fox jumps over a lazy dog while patina keeps workspaces of agents apart and git packs objects with deltas")
	line := func() string {
		var s strings.Builder
		for range 12 {
			s.WriteString(words[rng.IntN(len(words))] + " ")
		}
		return s.String() + "\n"
	}
	files := make([][]string, 400)
	for i := range files {
		for range 800 {
			files[i] = append(files[i], line())
		}
	}
	for c := range 4 {
		for i, f := range files {
			for range 20 {
				f[rng.IntN(len(f))] = line()
			}
			os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d.txt", i)), []byte(strings.Join(f, "")), 0o644)
		}
		benchGit(b, dir, "add", "-A")
		benchGit(b, dir, "commit", "-q", "-m", fmt.Sprint(c))
	}
	cmd := exec.Command("git", "pack-objects", "--stdout", "--revs", "-q", "--delta-base-offset")
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader("HEAD\n")
	pack, err := cmd.Output()
	if err != nil {
		b.Fatal(err)
	}
	lim := packLimits{packBytes: 2 << 30, objectBytes: 512 << 20, totalBytes: 8 << 30, hashLen: 20}
	st, err := scanPack(io.Discard, bytes.NewReader(pack), lim)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("pack: %.1f MB, %d objects (%d deltas), %.1f MB inflated", float64(len(pack))/1e6, st.Objects, st.Deltas, float64(st.Inflated)/1e6)

	scratch := filepath.Join(b.TempDir(), "scratch")
	os.MkdirAll(scratch, 0o755)
	benchGit(b, scratch, "init", "-q")
	var scan, index time.Duration
	b.SetBytes(int64(len(pack)))
	for b.Loop() {
		start := time.Now()
		if _, err := scanPack(io.Discard, bytes.NewReader(pack), lim); err != nil {
			b.Fatal(err)
		}
		scan += time.Since(start)
		start = time.Now()
		cmd := exec.Command("git", "index-pack", "--stdin", "--threads=1")
		cmd.Dir = scratch
		cmd.Stdin = bytes.NewReader(pack)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("index-pack: %v %s", err, out)
		}
		index += time.Since(start)
	}
	b.ReportMetric(float64(scan)/float64(index), "scan/index-pack")
	b.ReportMetric(float64(len(pack))*float64(b.N)/scan.Seconds()/1e6, "scan-MB/s")
}
