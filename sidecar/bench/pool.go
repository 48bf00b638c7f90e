package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/docker/docker/api/types/container"

	pclient "github.com/patina-dev/patina/sidecar/client"
)

// WarmPool times create → first exec on a sidecar with `serve --warm 1`:
// creates that take a pooled workspace, creates that make their own (an
// env keeps them out of the pool), and `docker run --rm IMAGE true` (create,
// start, wait, remove through the API), all in the same run. Targets: with
// the pool p50 ≤ 100 ms, p99 ≤ 300 ms; without it ≤ 1/5 of docker run.
type WarmPool struct {
	Pool      Latency `json:"pool"`
	NoPool    Latency `json:"no_pool"`
	DockerRun Latency `json:"docker_run"`
	// Ratios to DockerRun's p50.
	PoolRatio   float64 `json:"pool_ratio"`
	NoPoolRatio float64 `json:"no_pool_ratio"`
}

// poolReadyWait bounds waiting for the pool to refill between samples.
const poolReadyWait = 2 * time.Minute

func (r *runner) warmPool(ctx context.Context) (WarmPool, error) {
	var wp WarmPool
	n := r.o.CreateSamples
	ds := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		d, err := r.dockerRun(ctx)
		if err != nil {
			return wp, err
		}
		ds = append(ds, d)
	}
	wp.DockerRun = summarise(ds)

	dir := filepath.Join(r.root, "pool-state")
	p, err := startSidecar(ctx, r.o.Binary, dir, filepath.Join(r.root, "pool.log"), r.o.Image, r.o.StartTimeout, "--warm", "1")
	if err != nil {
		return wp, err
	}
	defer func() {
		p.stop()
		_ = removeContainers(context.WithoutCancel(ctx), r.api, dir)
	}()
	c := pclient.New(p.Addr, p.Token, nil)
	sample := func(name string, memoryMB int64) (time.Duration, error) {
		t0 := time.Now()
		ws, err := c.CreateWorkspace(ctx, pclient.CreateWorkspaceRequest{Name: name, MemoryMB: memoryMB})
		if err != nil {
			return 0, fmt.Errorf("create %s: %w", name, err)
		}
		if err := execTrue(ctx, c, ws.ID, "default"); err != nil {
			return 0, fmt.Errorf("first exec in %s: %w", name, err)
		}
		d := time.Since(t0)
		return d, c.DeleteWorkspace(ctx, ws.ID, pclient.DeleteOptions{})
	}
	pool, own := make([]time.Duration, 0, n), make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		if err := waitPoolReady(ctx, p, 1, poolReadyWait); err != nil {
			return wp, err
		}
		d, err := sample(fmt.Sprintf("bench-pool-%d", i), 0)
		if err != nil {
			return wp, err
		}
		pool = append(pool, d)
		if err := waitPoolReady(ctx, p, 1, poolReadyWait); err != nil {
			return wp, err
		}
		// Another memory limit than the pool's: a create the pool cannot
		// serve (one with its own env is served since the pool gives env).
		if d, err = sample(fmt.Sprintf("bench-nopool-%d", i), ownMemoryMB); err != nil {
			return wp, err
		}
		own = append(own, d)
	}
	// Each figure of the creates it should be: the pool served n.
	if taken, err := poolMetric(ctx, p, "patina_pool_taken_total"); err != nil || taken != n {
		return wp, fmt.Errorf("the warm pool served %d creates, want %d (one per sample with the pool, none without): %v", taken, n, err)
	}
	wp.Pool, wp.NoPool = summarise(pool), summarise(own)
	if wp.DockerRun.P50MS > 0 {
		wp.PoolRatio = wp.Pool.P50MS / wp.DockerRun.P50MS
		wp.NoPoolRatio = wp.NoPool.P50MS / wp.DockerRun.P50MS
	}
	return wp, nil
}

// dockerRun is `docker run --rm IMAGE true` through the API: create,
// start, wait until it exits, remove.
func (r *runner) dockerRun(ctx context.Context) (time.Duration, error) {
	t0 := time.Now()
	c, err := r.api.ContainerCreate(ctx, &container.Config{Image: r.o.Image, Cmd: []string{"true"}}, &container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		return 0, fmt.Errorf("docker run: %w", err)
	}
	defer func() {
		_ = r.api.ContainerRemove(context.WithoutCancel(ctx), c.ID, container.RemoveOptions{Force: true})
	}()
	if err := r.api.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		return 0, fmt.Errorf("docker run: %w", err)
	}
	for {
		insp, err := r.api.ContainerInspect(ctx, c.ID)
		if err != nil {
			return 0, fmt.Errorf("docker run: %w", err)
		}
		if insp.State != nil && !insp.State.Running {
			break
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
	if err := r.api.ContainerRemove(ctx, c.ID, container.RemoveOptions{}); err != nil {
		return 0, fmt.Errorf("docker run: %w", err)
	}
	return time.Since(t0), nil
}
