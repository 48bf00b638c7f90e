package worktree

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// gitPeak samples, every millisecond until stopped, the peak resident
// memory (VmHWM) of this process's git children working in dir, by
// subcommand. (Not getrusage's ru_maxrss: a child started with vfork, as
// Go starts them, inherits its parent's peak at exec.)
type gitPeak struct {
	dir  string
	stop chan struct{}
	done chan struct{}
	peak map[string]int64
}

func watchGit(t testing.TB, dir string) *gitPeak {
	t.Helper()
	w := &gitPeak{dir: dir, stop: make(chan struct{}), done: make(chan struct{}), peak: map[string]int64{}}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			w.sample()
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { w.Stop() })
	return w
}

func (w *gitPeak) sample() {
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	for _, task := range tasks {
		b, _ := os.ReadFile(task)
		for _, pid := range strings.Fields(string(b)) {
			if cwd, _ := os.Readlink("/proc/" + pid + "/cwd"); cwd != w.dir {
				continue
			}
			cmd := gitSubcommand("/proc/" + pid + "/cmdline")
			if hwm := vmHWM("/proc/" + pid + "/status"); cmd != "" && hwm > w.peak[cmd] {
				w.peak[cmd] = hwm
			}
		}
	}
}

// Stop stops sampling and returns the largest peak and its subcommand.
func (w *gitPeak) Stop() (string, int64) {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
	var cmd string
	var rss int64
	for c, n := range w.peak {
		if n > rss {
			cmd, rss = c, n
		}
	}
	return cmd, rss
}

// gitSubcommand is the subcommand in a git command line: the first
// argument after git's own options.
func gitSubcommand(cmdline string) string {
	b, _ := os.ReadFile(cmdline)
	args := strings.Split(string(b), "\x00")
	if len(args) == 0 || filepath.Base(args[0]) != "git" {
		return ""
	}
	for i := 1; i < len(args); i++ {
		switch {
		case args[i] == "-c":
			i++
		case strings.HasPrefix(args[i], "-"):
		default:
			return args[i]
		}
	}
	return ""
}

// vmHWM is the VmHWM line of a /proc status file, in bytes.
func vmHWM(status string) int64 {
	b, _ := os.ReadFile(status)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
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
	r := openRepo(t, repo)
	ws := mustCreate(t, r, CreateRequest{Name: "bomb"})
	in := newInside(t, ws)
	writeFile(t, filepath.Join(in.Dir, "a.txt"), "a\n")
	c, err := in.Commit(testCtx(t), CommitRequest{})
	if err != nil {
		t.Fatal(err)
	}
	before := snapshotRepo(t, repo)
	rss := watchGit(t, r.root)
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
			// Under a second on an idle machine (BenchmarkDeltaBomb);
			// generous here, where -race and parallel tests slow it.
			if took > 10*time.Second {
				t.Errorf("%s (%d deltas): refused after %v", name, deltas, took)
			}
			t.Logf("%s (%d deltas): %v in %v", name, deltas, err, took.Round(time.Millisecond))
		}
	}
	cmd, peak := rss.Stop()
	t.Logf("git's peak memory: %.1f MiB (%s; by command: %v)", float64(peak)/(1<<20), cmd, rss.peak)
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

	r := openRepo(t, repo)
	rss := watchGit(t, r.root)
	d, err := r.Diff(testCtx(t), "big", DiffRequest{Head: c.Commit, Source: bytesSource(pack.Bytes())})
	if err != nil || len(d.Files) != 1 {
		t.Fatalf("exp the diff under the default limits, got %+v, %v", d.Files, err)
	}
	cmd, peak := rss.Stop()
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
	waitExecutable(t, spin)
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

// The memory limit is on what git allocates, not on the packs it maps: a
// repository whose pack is several times the limit works as usual. (With
// RLIMIT_AS at 32 MiB, or even 256 MiB, git could not map this pack:
// "packfile ... cannot be mapped".)
func TestGitMemoryLimitIgnoresPackSize(t *testing.T) {
	t.Parallel()
	requireLinux(t)
	if testing.Short() {
		t.Skip("writes an 80 MB pack")
	}
	repo := newUserRepo(t)
	noise := make([]byte, 40<<20)
	for i := range 2 {
		rand.Read(noise)
		writeFile(t, filepath.Join(repo, fmt.Sprintf("big%d.bin", i)), string(noise))
	}
	gitT(t, repo, "add", "-A")
	gitT(t, repo, "commit", "-q", "-m", "big files")
	gitT(t, repo, "repack", "-adq")
	r, err := Open(testCtx(t), Config{StateDir: t.TempDir(), Logger: testLogger(t), GitMemoryBytes: 32 << 20}, repo)
	if err != nil {
		t.Fatal(err)
	}
	ws := mustCreate(t, r, CreateRequest{Name: "small"})
	in := newInside(t, ws)
	agentCommit(t, r, ws, in, map[string]string{"small.txt": "small\n"})
	if d := diffOf(t, r, ws, in); len(d.Files) != 1 {
		t.Fatalf("exp one file in the diff, got %+v", d.Files)
	}
	if _, err := r.Merge(testCtx(t), "small", MergeRequest{}); err != nil {
		t.Fatalf("merge under a 32 MiB limit in a repository of an 80 MB pack: %v", err)
	}
	if exp, got := "small\n", readFile(t, filepath.Join(repo, "small.txt")); exp != got {
		t.Fatalf("exp the merged file, got %q", got)
	}
}

// waitExecutable waits until a program just written can be run: a child
// forked meanwhile by a parallel test holds the writing descriptor until it
// execs, and an exec of the file fails with ETXTBSY until then.
func waitExecutable(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := exec.Command(path, "version").Run()
		if !errors.Is(err, syscall.ETXTBSY) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s stayed busy: %v", path, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
