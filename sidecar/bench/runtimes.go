package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/docker/docker/client"

	pclient "github.com/patina-dev/patina/sidecar/client"
)

// RuntimeOptions configure Runtimes: what each OCI runtime costs.
type RuntimeOptions struct {
	// Binary is the patina executable (required); Image the workspaces'
	// image (default image.DefaultTag), present on both engines.
	Binary string
	Image  string
	// RunscHost is the Docker engine (DOCKER_HOST form) that has gVisor's
	// runsc registered (required); RuncHost the one for runc ("": the
	// environment's).
	RunscHost string
	RuncHost  string
	// Samples execs of `true` are timed in each (default 300, after 20
	// unmeasured); CreateSamples workspaces are created to their first
	// exec (default 3).
	Samples       int
	CreateSamples int
	Progress      io.Writer
	StartTimeout  time.Duration
}

// Runtime is one runtime's figures.
type Runtime struct {
	Name string `json:"name"`
	// Exec: sequential execs of `true` through the HTTP API.
	Exec Latency `json:"exec"`
	// Create: a scratch workspace's creation to its first exec.
	Create Latency `json:"create"`
	// IdleMemoryBytes is the workspace container's memory after the
	// execs, idle (the engine's figure: its cgroup's usage less the page
	// cache it may drop), the mean over the created workspaces.
	IdleMemoryBytes int64 `json:"idle_memory_bytes"`
}

// RuntimesReport compares runsc against runc, same run.
type RuntimesReport struct {
	Runc  Runtime `json:"runc"`
	Runsc Runtime `json:"runsc"`
	// ExecRatio and CreateRatio are runsc's p50 ÷ runc's; MemoryRatio the
	// idle memory's.
	ExecRatio   float64 `json:"exec_ratio"`
	CreateRatio float64 `json:"create_ratio"`
	MemoryRatio float64 `json:"memory_ratio"`
}

// Runtimes measures a workspace on runc and on runsc (gVisor), each with a
// sidecar of its own (runsc's with --runtime runsc on RunscHost).
func Runtimes(ctx context.Context, o RuntimeOptions) (RuntimesReport, error) {
	var rep RuntimesReport
	if o.Binary == "" || o.RunscHost == "" {
		return rep, fmt.Errorf("bench runtimes: the binary and the runsc engine are required")
	}
	o.Image = cmp.Or(o.Image, Options{}.withDefaults().Image)
	o.Samples = cmp.Or(o.Samples, 300)
	o.CreateSamples = cmp.Or(o.CreateSamples, 3)
	o.StartTimeout = cmp.Or(o.StartTimeout, defaultStartTimeout)
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	root, err := os.MkdirTemp("", "patina-bench-runtimes-")
	if err != nil {
		return rep, err
	}
	defer os.RemoveAll(root)
	fmt.Fprintf(o.Progress, "bench: runc: %d creates, %d execs\n", o.CreateSamples, o.Samples)
	if rep.Runc, err = measureRuntime(ctx, o, root, "runc", o.RuncHost); err != nil {
		return rep, err
	}
	fmt.Fprintf(o.Progress, "bench: runsc: %d creates, %d execs\n", o.CreateSamples, o.Samples)
	if rep.Runsc, err = measureRuntime(ctx, o, root, "runsc", o.RunscHost); err != nil {
		return rep, err
	}
	ratio := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	rep.ExecRatio = ratio(rep.Runsc.Exec.P50MS, rep.Runc.Exec.P50MS)
	rep.CreateRatio = ratio(rep.Runsc.Create.P50MS, rep.Runc.Create.P50MS)
	rep.MemoryRatio = ratio(float64(rep.Runsc.IdleMemoryBytes), float64(rep.Runc.IdleMemoryBytes))
	return rep, nil
}

// measureRuntime starts a sidecar with --runtime name on host and times
// creates and execs in its workspaces.
func measureRuntime(ctx context.Context, o RuntimeOptions, root, name, host string) (Runtime, error) {
	rt := Runtime{Name: name}
	var env []string
	copts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
	if host != "" {
		env = append(env, "DOCKER_HOST="+host)
		copts = append(copts, client.WithHost(host))
	}
	api, err := client.NewClientWithOpts(copts...)
	if err != nil {
		return rt, err
	}
	defer api.Close()
	stateDir := filepath.Join(root, name+"-state")
	p, err := startSidecarEnv(ctx, env, o.Binary, stateDir, filepath.Join(root, name+".log"), o.Image, o.StartTimeout, "--runtime", name)
	if err != nil {
		return rt, err
	}
	defer func() {
		p.stop()
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		_ = removeContainers(cctx, api, stateDir)
		cancel()
	}()
	c := pclient.New(p.Addr, p.Token, nil)
	var creates []time.Duration
	var mem int64
	for i := 0; i < o.CreateSamples; i++ {
		t0 := time.Now()
		ws, err := c.CreateWorkspace(ctx, pclient.CreateWorkspaceRequest{
			Name: fmt.Sprintf("bench-%s-%d", name, i), Image: o.Image,
			// Alike under both: a sidecar whose engine is in another
			// network namespace has no network boundary to give.
			Network: &pclient.NetworkPolicy{Mode: "none"},
		})
		if err != nil {
			return rt, fmt.Errorf("%s: create a workspace: %w", name, err)
		}
		err = execTrue(ctx, c, ws.ID, "default")
		creates = append(creates, time.Since(t0))
		if err == nil && i == 0 {
			rt.Exec, err = timeExecs(ctx, c, ws.ID, o.Samples)
		}
		if err == nil {
			var m memUse
			if m, err = containerMemory(ctx, api, ws.ContainerID); err == nil {
				mem += m.Stats
			}
		}
		_ = c.DeleteWorkspace(context.WithoutCancel(ctx), ws.ID, pclient.DeleteOptions{})
		if err != nil {
			return rt, fmt.Errorf("%s: %w", name, err)
		}
	}
	rt.Create = summarise(creates)
	rt.IdleMemoryBytes = mem / int64(o.CreateSamples)
	return rt, nil
}

// timeExecs times n sequential execs of `true`, after 20 unmeasured.
func timeExecs(ctx context.Context, c *pclient.Client, ws string, n int) (Latency, error) {
	for i := 0; i < 20; i++ {
		if err := execTrue(ctx, c, ws, "default"); err != nil {
			return Latency{}, fmt.Errorf("warm-up: %w", err)
		}
	}
	ds := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if err := execTrue(ctx, c, ws, "default"); err != nil {
			return Latency{}, fmt.Errorf("exec %d: %w", i, err)
		}
		ds = append(ds, time.Since(t0))
	}
	return summarise(ds), nil
}

// Pass is true: the runtimes' figures are not judged.
func (r RuntimesReport) Pass() bool { return true }

// WriteText prints the comparison.
func (r RuntimesReport) WriteText(w io.Writer) error {
	_, err := fmt.Fprintf(w, `runtime  exec p50 / p90  create→first exec p50  idle memory
runc     %s / %s  %s  %s   (the engine's default transport)
runsc    %s / %s  %s  %s   (the agent through the exec relay)
runsc ÷ runc: exec %.1f×, create %.1f×, memory %.1f×
`,
		fmtMS(r.Runc.Exec.P50MS), fmtMS(r.Runc.Exec.P90MS), fmtMS(r.Runc.Create.P50MS), fmtBytes(r.Runc.IdleMemoryBytes),
		fmtMS(r.Runsc.Exec.P50MS), fmtMS(r.Runsc.Exec.P90MS), fmtMS(r.Runsc.Create.P50MS), fmtBytes(r.Runsc.IdleMemoryBytes),
		r.ExecRatio, r.CreateRatio, r.MemoryRatio)
	return err
}
