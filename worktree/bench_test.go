package worktree

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
