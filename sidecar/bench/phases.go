package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	pclient "github.com/patina-dev/patina/sidecar/client"
)

// agentRSS is the resident memory of the workspace's agent, from the
// engine's process list of the container (docker top): nothing of the
// container's own is read.
func (r *runner) agentRSS(ctx context.Context, containerID string) (rss, anon, file int64, err error) {
	top, err := r.api.ContainerTop(ctx, containerID, []string{"-o", "pid,rss,args"})
	if err != nil {
		return 0, 0, 0, fmt.Errorf("list the container's processes: %w", err)
	}
	pidCol, rssCol, argsCol := -1, -1, -1
	for i, t := range top.Titles {
		switch strings.ToUpper(t) {
		case "PID":
			pidCol = i
		case "RSS":
			rssCol = i
		case "ARGS", "COMMAND":
			argsCol = i
		}
	}
	if rssCol < 0 || argsCol < 0 {
		return 0, 0, 0, fmt.Errorf("unexpected process list columns %v", top.Titles)
	}
	for _, p := range top.Processes {
		if len(p) > max(rssCol, argsCol, pidCol) && isAgentServe(strings.Fields(p[argsCol])) {
			kb, err := strconv.ParseInt(strings.TrimSpace(p[rssCol]), 10, 64)
			if err != nil {
				return 0, 0, 0, fmt.Errorf("unexpected RSS %q", p[rssCol])
			}
			if pidCol >= 0 {
				anon, file = procRSS(strings.TrimSpace(p[pidCol]))
			}
			return kb * 1024, anon, file, nil
		}
	}
	return 0, 0, 0, fmt.Errorf("no agent among the container's processes")
}

// isAgentServe reports whether a process's arguments are an agent's
// (patina agent serve …), not the init's that starts it (patina agent
// pause --once -- agent serve …).
func isAgentServe(argv []string) bool {
	return len(argv) >= 3 && argv[1] == "agent" && argv[2] == "serve"
}

// procRSS reads the agent's anonymous and file-backed resident memory
// (zero when that pid is not an agent of this host: a remote engine).
func procRSS(pid string) (anon, file int64) {
	cmd, err := os.ReadFile("/proc/" + pid + "/cmdline")
	if err != nil || !isAgentServe(strings.Split(string(cmd), "\x00")) {
		return 0, 0
	}
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "RssAnon":
			anon = n * 1024
		case "RssFile":
			file = n * 1024
		}
	}
	return anon, file
}

// stream has a command write StreamBytes and reads them all through the
// API's follow endpoint.
func (r *runner) stream(ctx context.Context, ws string) (Transfer, error) {
	n := r.o.StreamBytes
	id, err := r.c.Start(ctx, ws, "default", pclient.ExecRequest{Command: fmt.Sprintf("head -c %d /dev/zero", n)})
	if err != nil {
		return Transfer{}, fmt.Errorf("start the output: %w", err)
	}
	t0 := time.Now()
	rc, err := r.c.OpenOutput(ctx, ws, "default", id, "stdout", 0, true)
	if err != nil {
		return Transfer{}, fmt.Errorf("follow the output: %w", err)
	}
	got, err := io.Copy(io.Discard, rc)
	rc.Close()
	d := time.Since(t0)
	if err != nil || got != n {
		return Transfer{}, fmt.Errorf("streamed %d bytes of %d: %v", got, n, err)
	}
	return transfer(n, d), nil
}

func transfer(n int64, d time.Duration) Transfer {
	return Transfer{Bytes: n, MS: ms(d), MBPerSecond: float64(n) / 1e6 / d.Seconds()}
}

// bigDiff takes the diff of a repository workspace holding a DiffBytes
// text file (its text is cut at the sidecar's limit; the objects are
// packed, sent and checked whole).
func (r *runner) bigDiff(ctx context.Context) (Transfer, error) {
	repo, err := r.gitRepo("diff", 1)
	if err != nil {
		return Transfer{}, err
	}
	ws, err := r.c.CreateWorkspace(ctx, pclient.CreateWorkspaceRequest{Name: "bench-diff", Repo: repo, Image: r.o.Image})
	if err != nil {
		return Transfer{}, fmt.Errorf("create the diff's workspace: %w", err)
	}
	r.track(ws.ID)
	defer r.deleteWorkspace(context.WithoutCancel(ctx), ws.ID)
	cmd := fmt.Sprintf("yes 'a line of text that a workspace wrote, with some words in it' | head -c %d > big.txt", r.o.DiffBytes)
	if err := r.out(ctx, ws.ID, cmd); err != nil {
		return Transfer{}, err
	}
	t0 := time.Now()
	d, err := r.c.Diff(ctx, ws.ID)
	if err != nil {
		return Transfer{}, fmt.Errorf("diff: %w", err)
	}
	if len(d.Files) != 1 {
		return Transfer{}, fmt.Errorf("diff: exp 1 file, got %d", len(d.Files))
	}
	return transfer(r.o.DiffBytes, time.Since(t0)), nil
}

// gitStatus times `git status` in a workspace of a GitFiles-file
// repository (inside its container, by the command's own duration) and in
// the repository itself, five times each after one untimed run.
func (r *runner) gitStatus(ctx context.Context) (GitStatus, error) {
	gs := GitStatus{Files: r.o.GitFiles}
	repo, err := r.gitRepo("status", r.o.GitFiles)
	if err != nil {
		return gs, err
	}
	ws, err := r.c.CreateWorkspace(ctx, pclient.CreateWorkspaceRequest{Name: "bench-status", Repo: repo, Image: r.o.Image})
	if err != nil {
		return gs, fmt.Errorf("create the status workspace: %w", err)
	}
	r.track(ws.ID)
	defer r.deleteWorkspace(context.WithoutCancel(ctx), ws.ID)
	// Each side times its own runs of `git status` (inside by bash's
	// $EPOCHREALTIME, which forks nothing; here by Go's clock), so that
	// neither includes an exec's round trip nor the log write that follows
	// it; the first run of each side is left out (it warms the caches).
	const runs = 7
	// Git treats files written in the same second as its index as "racily
	// clean" and reads them whole at every status until it writes the
	// index again, a second later: so does any repository right after a
	// checkout of 10,000 files. The first (unmeasured) status after that
	// second rewrites the index; the measured ones then compare like with
	// like.
	select {
	case <-ctx.Done():
		return gs, ctx.Err()
	case <-time.After(1500 * time.Millisecond):
	}
	res, err := r.c.Exec(ctx, ws.ID, "default", pclient.ExecRequest{Command: fmt.Sprintf(
		`for ((i = 0; i < %d; i++)); do s=$EPOCHREALTIME; git status >/dev/null || exit 1; e=$EPOCHREALTIME; echo "$s $e"; done`, runs)})
	if err != nil || res.ExitCode != 0 {
		return gs, fmt.Errorf("git status in the workspace: %v %s", err, res.Stderr)
	}
	var in, host []float64
	for i, line := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			return gs, fmt.Errorf("git status in the workspace: a timing %q", line)
		}
		start, err1 := strconv.ParseFloat(f[0], 64)
		end, err2 := strconv.ParseFloat(f[1], 64)
		if err1 != nil || err2 != nil || end < start {
			return gs, fmt.Errorf("git status in the workspace: a timing %q", line)
		}
		if i > 0 {
			in = append(in, (end-start)*1000)
		}
	}
	if len(in) != runs-1 {
		return gs, fmt.Errorf("git status in the workspace: exp %d timings, got %q", runs, res.Stdout)
	}
	for i := 0; i < runs; i++ {
		t0 := time.Now()
		c := exec.CommandContext(ctx, "git", "status")
		c.Dir = repo
		c.Stdout = io.Discard
		if err := c.Run(); err != nil {
			return gs, fmt.Errorf("git status in the repository: %w", err)
		}
		if i > 0 {
			host = append(host, ms(time.Since(t0)))
		}
	}
	gs.WorkspaceMS, gs.RepoMS = median(in), median(host)
	if gs.RepoMS > 0 {
		gs.Ratio = gs.WorkspaceMS / gs.RepoMS
	}
	return gs, nil
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// gitRepo makes a repository of n files under the run's directory.
func (r *runner) gitRepo(name string, n int) (string, error) {
	dir := filepath.Join(r.root, "repo-"+name)
	for i := 0; i < n; i++ {
		p := filepath.Join(dir, fmt.Sprintf("d%02d", i%50), fmt.Sprintf("f%05d.txt", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, []byte(fmt.Sprintf("file %d\n", i)), 0o644); err != nil {
			return "", err
		}
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "-A"},
		{"-c", "user.name=bench", "-c", "user.email=bench@localhost", "commit", "-q", "--allow-empty", "-m", "bench"},
	} {
		c := exec.Command("git", args...)
		c.Dir = dir
		if out, err := c.CombinedOutput(); err != nil {
			return "", fmt.Errorf("git %v: %v\n%s", args, err, out)
		}
	}
	return dir, nil
}

// out runs a command and fails unless it exits 0.
func (r *runner) out(ctx context.Context, ws, cmd string) error {
	res, err := r.c.Exec(ctx, ws, "default", pclient.ExecRequest{Command: cmd})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("%q exited %d: %s", cmd, res.ExitCode, res.Stderr)
	}
	return nil
}

func (r *runner) track(id string) {
	r.mu.Lock()
	r.workspaces = append(r.workspaces, id)
	r.mu.Unlock()
}

// relayExecs starts a second sidecar that reaches agents through the exec
// relay, and times sequential execs in a workspace of its.
func (r *runner) relayExecs(ctx context.Context) (Latency, error) {
	r.relayDir = filepath.Join(r.root, "relay-state")
	p, err := startSidecar(ctx, r.o.Binary, r.relayDir, filepath.Join(r.root, "relay.log"), r.o.Image, r.o.StartTimeout, "--agent-transport", "exec")
	if err != nil {
		return Latency{}, err
	}
	defer p.stop()
	c := pclient.New(p.Addr, p.Token, nil)
	ws, err := c.CreateWorkspace(ctx, pclient.CreateWorkspaceRequest{Name: "bench-relay", Image: r.o.Image})
	if err != nil {
		return Latency{}, fmt.Errorf("create the relay's workspace: %w", err)
	}
	defer func() { _ = c.DeleteWorkspace(context.WithoutCancel(ctx), ws.ID, pclient.DeleteOptions{}) }()
	for i := 0; i < 20; i++ {
		if err := execTrue(ctx, c, ws.ID, "default"); err != nil {
			return Latency{}, fmt.Errorf("relay warm-up: %w", err)
		}
	}
	ds := make([]time.Duration, 0, r.o.RelaySamples)
	for i := 0; i < r.o.RelaySamples; i++ {
		t0 := time.Now()
		if err := execTrue(ctx, c, ws.ID, "default"); err != nil {
			return Latency{}, fmt.Errorf("relay exec %d: %w", i, err)
		}
		ds = append(ds, time.Since(t0))
	}
	return summarise(ds), nil
}
