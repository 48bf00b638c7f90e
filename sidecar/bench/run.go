package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/client"

	pclient "github.com/patina-dev/patina/sidecar/client"
)

// cleanupTimeout bounds removing what a run created, even after ctx ended.
const cleanupTimeout = 2 * time.Minute

// Run starts a sidecar as a child process, measures it (see the package
// doc), stops it, and removes everything it created.
func Run(ctx context.Context, opts Options) (rep Report, err error) {
	o := opts.withDefaults()
	if o.Binary == "" {
		return rep, errors.New("bench: Options.Binary is required")
	}
	rep = Report{Image: o.Image, CPUs: runtime.NumCPU(), StartedAt: time.Now()}
	api := o.Docker
	if api == nil {
		cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
		if err != nil {
			return rep, fmt.Errorf("docker client: %w", err)
		}
		defer cli.Close()
		api = cli
	}
	if err := checkImage(ctx, api, o.Image); err != nil {
		return rep, err
	}

	r, err := newRunner(o, api)
	if err != nil {
		return rep, err
	}
	defer func() {
		if cerr := r.cleanup(r.root); cerr != nil && err == nil {
			err = cerr
		}
	}()

	r.progress("starting a sidecar (%s serve, state in %s)", o.Binary, r.stateDir)
	r.proc, err = startSidecar(ctx, o.Binary, r.stateDir, filepath.Join(r.root, "sidecar.log"), o.Image, o.StartTimeout)
	if err != nil {
		return rep, err
	}
	rep.Version = r.proc.Version
	r.c = pclient.New(r.proc.Addr, r.proc.Token, nil)
	if err := r.c.Health(ctx); err != nil {
		return rep, fmt.Errorf("sidecar health: %w", err)
	}
	if rep.RSS.StartBytes, err = r.proc.rss(); err != nil {
		return rep, err
	}
	if err := r.measure(ctx, &rep); err != nil {
		return rep, err
	}
	rep.DurationMS = ms(time.Since(rep.StartedAt))
	rep.judge()
	return rep, nil
}

// checkImage fails early, and clearly, when the image is missing.
func checkImage(ctx context.Context, api DockerAPI, ref string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := api.ImageInspect(ctx, ref)
	if cerrdefs.IsNotFound(err) {
		return fmt.Errorf("image %s is missing: build it with `patina image build` (or pass another image)", ref)
	}
	if err != nil {
		return fmt.Errorf("docker: %w (is the Docker engine running?)", err)
	}
	return nil
}

// runner holds a run's state.
type runner struct {
	o        Options
	api      DockerAPI
	stateDir string
	proc     *sidecarProc
	c        *pclient.Client

	root     string // the run's temporary directory
	relayDir string // the relay sidecar's state directory

	mu         sync.Mutex
	workspaces []string                          // ids created and not yet deleted
	extra      []func(ctx context.Context) error // more to remove, last first
}

// newRunner makes a run's temporary directory (the sidecar's state
// directory inside); cleanup removes it.
func newRunner(o Options, api DockerAPI) (*runner, error) {
	root, err := os.MkdirTemp("", "patina-bench-")
	if err != nil {
		return nil, err
	}
	return &runner{o: o, api: api, stateDir: filepath.Join(root, "state"), root: root}, nil
}

func (r *runner) progress(format string, args ...any) {
	fmt.Fprintf(r.o.Progress, "bench: "+format+"\n", args...)
}

// measure runs the phases in order, against one workspace.
func (r *runner) measure(ctx context.Context, rep *Report) error {
	o := r.o
	r.progress("creating the workspace")
	ws, err := r.createWorkspace(ctx, "bench")
	if err != nil {
		return err
	}
	if ws.ContainerID == "" {
		return fmt.Errorf("workspace %s has no container id", ws.ID)
	}

	r.progress("%d sequential HTTP execs of `true` (after %d warm-up)", o.Samples, o.Warmup)
	if rep.HTTPExec, rep.HTTPConnections, err = r.httpExecs(ctx, ws.ID); err != nil {
		return err
	}

	r.progress("%d Docker API execs of `true` in container %.12s", o.DockerSamples, ws.ContainerID)
	if rep.DockerExec, err = r.dockerExecs(ctx, ws.ContainerID); err != nil {
		return err
	}

	r.progress("%d × workspace create → first exec", o.CreateSamples)
	if rep.CreateToFirstExec, err = r.createToFirstExec(ctx); err != nil {
		return err
	}

	r.progress("creating %d sessions", o.Sessions)
	sids, err := r.createSessions(ctx, ws.ID)
	if err != nil {
		return err
	}
	rep.RSS.Sessions = len(sids)
	if rep.RSS.SessionsBytes, err = r.proc.rss(); err != nil {
		return err
	}

	r.progress("%d sessions × %d execs concurrently", o.Sessions, o.Execs)
	rep.Concurrent = r.concurrent(ctx, ws.ID, sids)
	if err := ctx.Err(); err != nil {
		return err
	}
	// Idle means the load is over: the processes get a moment to notice
	// (the agent gives memory back after a second without calls).
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(idleSettle):
	}
	if rep.RSS.IdleBytes, err = r.proc.rss(); err != nil {
		return err
	}
	if rep.AgentRSSBytes, rep.AgentAnonBytes, rep.AgentFileBytes, err = r.agentRSS(ctx, ws.ContainerID); err != nil {
		return err
	}
	r.progress("one idle workspace's memory")
	if rep.IdleWorkspace, err = r.idleWorkspace(ctx); err != nil {
		return err
	}

	r.progress("streaming %s of output", fmtBytes(o.StreamBytes))
	if rep.Stream, err = r.stream(ctx, ws.ID); err != nil {
		return err
	}
	r.progress("the diff of a %s file", fmtBytes(o.DiffBytes))
	if rep.Diff, err = r.bigDiff(ctx); err != nil {
		return err
	}
	if rep.RSS.AfterLoadBytes, err = r.proc.rss(); err != nil {
		return err
	}

	r.progress("%d HTTP requests and %s through a forwarded port and to the container's address", o.PortSamples, fmtBytes(o.PortBytes))
	if rep.Ports, err = r.ports(ctx, ws.ID, ws.ContainerID); err != nil {
		return err
	}

	r.progress("%d HTTPS requests and %s from the workspace through the egress proxy and from the host, to a server on \"the internet\"", o.PortSamples, fmtBytes(o.PortBytes))
	if rep.Egress, err = r.egress(ctx, ws); err != nil {
		return err
	}

	r.progress("fork of a workspace with %s of installed files", fmtBytes(o.ForkBytes))
	if rep.Fork, err = r.fork(ctx); err != nil {
		return err
	}

	r.progress("%d × resume after idle stop → first exec", o.CreateSamples)
	if rep.Resume, err = r.resume(ctx); err != nil {
		return err
	}

	r.progress("git status in a workspace of %d files and in its repository", o.GitFiles)
	if rep.GitStatus, err = r.gitStatus(ctx); err != nil {
		return err
	}

	r.progress("create of a %d-file repository workspace (%s of history): the first of its base, a second, one of a later base", o.GitFiles, fmtBytes(o.RepoHistoryBytes))
	if rep.RepoCreate, err = r.repoCreate(ctx); err != nil {
		return err
	}

	r.progress("%d × create → first exec with a warm pool (serve --warm 1) and without, and docker run --rm IMAGE true", o.CreateSamples)
	if rep.WarmPool, err = r.warmPool(ctx); err != nil {
		return err
	}

	r.progress("create of a workspace of a repository with a devcontainer.json: the first (builds its template), a second from its template's warm pool, a second without")
	if rep.Devcontainer, err = r.devcontainer(ctx); err != nil {
		return err
	}

	r.progress("%d execs through the exec relay (a second sidecar, --agent-transport exec)", o.RelaySamples)
	if rep.RelayExec, err = r.relayExecs(ctx); err != nil {
		return err
	}

	r.progress("the sidecar's memory: %d execs at once writing 2 × %s each, then %d forwarded connections never read", o.MemExecs, fmtBytes(o.MemOutputBytes), o.MemConnections)
	if rep.Memory, err = r.memory(ctx); err != nil {
		return err
	}
	return nil
}

func (r *runner) createWorkspace(ctx context.Context, name string) (pclient.Workspace, error) {
	return r.createWorkspaceOn(ctx, name, nil)
}

// createWorkspaceOn creates a workspace with placement constraints
// (--engine swarm), remembered for the cleanup.
func (r *runner) createWorkspaceOn(ctx context.Context, name string, placement []string) (pclient.Workspace, error) {
	ws, err := r.c.CreateWorkspace(ctx, pclient.CreateWorkspaceRequest{Name: name, Image: r.o.Image, Placement: placement})
	if err != nil {
		return ws, fmt.Errorf("create workspace %s: %w", name, err)
	}
	r.mu.Lock()
	r.workspaces = append(r.workspaces, ws.ID)
	r.mu.Unlock()
	return ws, nil
}

func (r *runner) deleteWorkspace(ctx context.Context, id string) error {
	if err := r.c.DeleteWorkspace(ctx, id, pclient.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete workspace %s: %w", id, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, w := range r.workspaces {
		if w == id {
			r.workspaces = append(r.workspaces[:i], r.workspaces[i+1:]...)
			break
		}
	}
	return nil
}

// execTrue runs `true` and fails unless it exits 0.
func execTrue(ctx context.Context, c *pclient.Client, ws, sid string) error {
	res, err := c.Exec(ctx, ws, sid, pclient.ExecRequest{Command: "true"})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("true exited %d", res.ExitCode)
	}
	return nil
}

// httpExecs times sequential execs through a client with one keep-alive
// connection, and counts the connections it dialled.
func (r *runner) httpExecs(ctx context.Context, ws string) (Latency, int, error) {
	var dials atomic.Int64
	d := &net.Dialer{Timeout: 5 * time.Second}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return d.DialContext(ctx, network, addr)
		},
		MaxIdleConnsPerHost: 1,
		DisableCompression:  true,
	}
	defer tr.CloseIdleConnections()
	c := pclient.New(r.proc.Addr, r.proc.Token, &http.Client{Transport: tr})
	const sid = "sequential"
	if _, err := c.CreateSession(ctx, ws, pclient.CreateSessionRequest{ID: sid}); err != nil {
		return Latency{}, 0, fmt.Errorf("create session: %w", err)
	}
	for i := 0; i < r.o.Warmup; i++ {
		if err := execTrue(ctx, c, ws, sid); err != nil {
			return Latency{}, 0, fmt.Errorf("warm-up exec: %w", err)
		}
	}
	ds := make([]time.Duration, 0, r.o.Samples)
	for i := 0; i < r.o.Samples; i++ {
		t0 := time.Now()
		if err := execTrue(ctx, c, ws, sid); err != nil {
			return Latency{}, 0, fmt.Errorf("HTTP exec %d: %w", i, err)
		}
		ds = append(ds, time.Since(t0))
	}
	return summarise(ds), int(dials.Load()), nil
}

// dockerExecs times Docker API execs in the workspace's container, after
// a few unmeasured ones.
func (r *runner) dockerExecs(ctx context.Context, containerID string) (Latency, error) {
	for i := 0; i < 3; i++ {
		if err := dockerExec(ctx, r.api, containerID); err != nil {
			return Latency{}, fmt.Errorf("docker exec warm-up: %w", err)
		}
	}
	ds := make([]time.Duration, 0, r.o.DockerSamples)
	for i := 0; i < r.o.DockerSamples; i++ {
		t0 := time.Now()
		if err := dockerExec(ctx, r.api, containerID); err != nil {
			return Latency{}, fmt.Errorf("docker exec %d: %w", i, err)
		}
		ds = append(ds, time.Since(t0))
	}
	return summarise(ds), nil
}

// createToFirstExec times fresh scratch workspaces from the create call to
// the return of their first exec, deleting each afterwards (untimed).
func (r *runner) createToFirstExec(ctx context.Context) (Latency, error) {
	return r.createToFirstExecOn(ctx, "bench-create", nil)
}

// createToFirstExecOn is createToFirstExec with placement constraints, the
// workspaces named prefix-N.
func (r *runner) createToFirstExecOn(ctx context.Context, prefix string, placement []string) (Latency, error) {
	ds := make([]time.Duration, 0, r.o.CreateSamples)
	for i := 0; i < r.o.CreateSamples; i++ {
		t0 := time.Now()
		ws, err := r.createWorkspaceOn(ctx, fmt.Sprintf("%s-%d", prefix, i), placement)
		if err != nil {
			return Latency{}, err
		}
		if err := execTrue(ctx, r.c, ws.ID, "default"); err != nil {
			return Latency{}, fmt.Errorf("first exec in %s: %w", ws.Name, err)
		}
		ds = append(ds, time.Since(t0))
		if err := r.deleteWorkspace(ctx, ws.ID); err != nil {
			return Latency{}, err
		}
	}
	return summarise(ds), nil
}

// createSessions creates the concurrent run's sessions, a few at a time.
func (r *runner) createSessions(ctx context.Context, ws string) ([]string, error) {
	sids := make([]string, r.o.Sessions)
	errs := make([]error, r.o.Sessions)
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i := range sids {
		sids[i] = fmt.Sprintf("c%03d", i)
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_, errs[i] = r.c.CreateSession(ctx, ws, pclient.CreateSessionRequest{ID: sids[i]})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("create sessions: %w", err)
	}
	return sids, nil
}

// concurrent runs one goroutine per session, each running Execs execs of
// `true` in its session, all released at once.
// idleSettle is how long the sessions idle after the concurrent load
// before the idle memory figures are taken.
const idleSettle = 3 * time.Second

func (r *runner) concurrent(ctx context.Context, ws string, sids []string) Concurrent {
	res := Concurrent{Sessions: len(sids), ExecsPerSession: r.o.Execs}
	lat := make([][]time.Duration, len(sids))
	var errCount atomic.Int64
	var firstErr sync.Once
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, sid := range sids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ds := make([]time.Duration, 0, r.o.Execs)
			<-start
			for j := 0; j < r.o.Execs && ctx.Err() == nil; j++ {
				t0 := time.Now()
				if err := execTrue(ctx, r.c, ws, sid); err != nil {
					errCount.Add(1)
					firstErr.Do(func() { res.FirstError = fmt.Sprintf("session %s: %v", sid, err) })
					continue
				}
				ds = append(ds, time.Since(t0))
			}
			lat[i] = ds
		}()
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(t0)
	var all []time.Duration
	for _, ds := range lat {
		all = append(all, ds...)
	}
	res.Execs = len(all)
	res.Errors = int(errCount.Load())
	res.ElapsedMS = ms(elapsed)
	if elapsed > 0 {
		res.ExecsPerSecond = float64(res.Execs) / elapsed.Seconds()
	}
	res.Latency = summarise(all)
	return res
}

// cleanup deletes the workspaces the run created, stops the sidecar,
// removes any container it left and the temporary directory.
func (r *runner) cleanup(root string) error {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	var errs []error
	if r.proc != nil {
		r.mu.Lock()
		left := append([]string(nil), r.workspaces...)
		r.mu.Unlock()
		for _, id := range left {
			if err := r.deleteWorkspace(ctx, id); err != nil {
				r.progress("cleanup: %v", err)
			}
		}
		r.proc.stop()
	}
	r.mu.Lock()
	extra := r.extra
	r.mu.Unlock()
	for i := len(extra) - 1; i >= 0; i-- {
		if err := extra[i](ctx); err != nil {
			errs = append(errs, err)
		}
	}
	// Whatever the sidecars could not delete goes now.
	for _, dir := range []string{r.stateDir, r.relayDir} {
		if dir == "" {
			continue
		}
		if err := removeContainers(ctx, r.api, dir); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(root); err != nil {
		errs = append(errs, fmt.Errorf("remove %s: %w", root, err))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bench cleanup: %w", err)
	}
	return nil
}
