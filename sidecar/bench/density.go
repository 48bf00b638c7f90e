package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	pclient "github.com/patina-dev/patina/sidecar/client"
)

// Issue 28's density figures: each of the idle workspaces answers an exec
// within densityExecTarget.
const densityExecTarget = time.Second

// Density run timings.
const (
	// densityParallel creates run at once: enough to keep the engine
	// busy, few enough that a create's own deadline holds on 2 CPUs.
	densityParallel = 4
	// densityCreateTimeout bounds one create and its first exec.
	densityCreateTimeout = 2 * time.Minute
	// densityExecTimeout bounds the exec that checks a workspace answers
	// (an exec slower than densityExecTarget is counted, not failed).
	densityExecTimeout = 30 * time.Second
	// densityMemorySamples containers' memory is read (evenly spread):
	// reading each of a thousand takes minutes and says no more.
	densityMemorySamples = 50
)

// DensityReport is a density run: Workspaces created, all left idle, then
// each asked to run `true`.
type DensityReport struct {
	Workspaces int `json:"workspaces"`
	// Created is how many were created (a create that failed ends the
	// creating: CreateError says why).
	Created     int     `json:"created"`
	CreateError string  `json:"create_error,omitempty"`
	CreateSecs  float64 `json:"create_seconds"`
	// MemoryBytes is an idle workspace's container memory as `docker
	// stats` shows it (usage less inactive file pages): the mean and the
	// largest over MemorySamples containers.
	MemoryBytes    int64 `json:"memory_bytes"`
	MaxMemoryBytes int64 `json:"max_memory_bytes"`
	MemorySamples  int   `json:"memory_samples"`
	// NoCacheBytes is the mean of the same containers' usage less all of
	// their page cache (IdleWorkspace.NoCacheBytes).
	NoCacheBytes int64 `json:"no_cache_bytes"`
	// HostBytesPerWorkspace is this host's MemAvailable before the creates
	// less after, divided by Created: what each costs the host, kernel
	// and engine included.
	HostBytesPerWorkspace int64 `json:"host_bytes_per_workspace"`
	HostAvailableBytes    int64 `json:"host_available_bytes"`
	// SidecarRSSBytes is the sidecar's resident memory with all of them,
	// SidecarRSSBeforeBytes before the first create.
	SidecarRSSBytes       int64 `json:"sidecar_rss_bytes"`
	SidecarRSSBeforeBytes int64 `json:"sidecar_rss_before_bytes"`
	// StorageDriver is the engine's (docker info): with fuse-overlayfs
	// each container reads the image's files (bash, libc) through a mount
	// of its own and holds its own page cache of them, which `docker
	// stats` counts; with overlay2 they are cached once for every
	// container of the image.
	StorageDriver string `json:"storage_driver"`
	// Exec is one exec of `true` in each, one after the other, after they
	// idled; Slow counts those over 1 s, ExecErrors those that failed.
	Exec       Latency `json:"exec"`
	Slow       int     `json:"slow"`
	ExecErrors int     `json:"exec_errors"`
}

// Density creates o.Workspaces workspaces (densityParallel at a time, each
// to its first exec), lets them idle, reads their memory and the host's,
// and then times one exec in each. It removes them all at the end.
func Density(ctx context.Context, o HostOptions) (DensityReport, error) {
	rep := DensityReport{Workspaces: o.Workspaces}
	if err := o.prepare("density"); err != nil {
		return rep, err
	}
	info, err := o.API.Info(ctx)
	if err != nil {
		return rep, fmt.Errorf("bench density: ask the engine for its storage driver: %w", err)
	}
	rep.StorageDriver = info.Driver
	p, done, err := o.startOwn(ctx, "density")
	if err != nil {
		return rep, err
	}
	defer done()
	c := pclient.New(p.Addr, p.Token, nil)
	before, err := memAvailable()
	if err != nil {
		return rep, err
	}
	if rep.SidecarRSSBeforeBytes, err = p.rss(); err != nil {
		return rep, err
	}

	ws, took, createErr := createMany(ctx, c, o)
	rep.Created, rep.CreateSecs = len(ws), took.Seconds()
	if createErr != nil {
		rep.CreateError = createErr.Error()
	}
	if len(ws) == 0 {
		return rep, fmt.Errorf("bench density: no workspace was created: %w", createErr)
	}
	fmt.Fprintf(o.Progress, "bench: density: %d workspaces in %.0f s; idling\n", len(ws), took.Seconds())
	select {
	case <-ctx.Done():
		return rep, ctx.Err()
	case <-time.After(idleSettle):
	}

	after, err := memAvailable()
	if err != nil {
		return rep, err
	}
	rep.HostAvailableBytes = after
	rep.HostBytesPerWorkspace = (before - after) / int64(len(ws))
	if rep.SidecarRSSBytes, err = p.rss(); err != nil {
		return rep, err
	}
	step := max(1, len(ws)/densityMemorySamples)
	var sum, sumNoCache int64
	for i := 0; i < len(ws); i += step {
		m, err := containerMemory(ctx, o.API, ws[i].ContainerID)
		if err != nil {
			return rep, err
		}
		sum += m.Stats
		sumNoCache += m.NoCache
		rep.MaxMemoryBytes = max(rep.MaxMemoryBytes, m.Stats)
		rep.MemorySamples++
	}
	rep.MemoryBytes = sum / int64(rep.MemorySamples)
	rep.NoCacheBytes = sumNoCache / int64(rep.MemorySamples)

	fmt.Fprintf(o.Progress, "bench: density: one exec in each\n")
	ds := make([]time.Duration, 0, len(ws))
	for _, w := range ws {
		ectx, cancel := context.WithTimeout(ctx, densityExecTimeout)
		t0 := time.Now()
		err := execTrue(ectx, c, w.ID, "default")
		d := time.Since(t0)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return rep, ctx.Err()
			}
			rep.ExecErrors++
			continue
		}
		ds = append(ds, d)
		if d > densityExecTarget {
			rep.Slow++
		}
	}
	rep.Exec = summarise(ds)
	return rep, nil
}

// createMany creates o.Workspaces workspaces, densityParallel at a time,
// each to its first exec; the first failure stops further creates.
func createMany(ctx context.Context, c *pclient.Client, o HostOptions) ([]pclient.Workspace, time.Duration, error) {
	var (
		mu       sync.Mutex
		made     []pclient.Workspace
		firstErr error
		next     int
		wg       sync.WaitGroup
	)
	claim := func() (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr != nil || next >= o.Workspaces || ctx.Err() != nil {
			return 0, false
		}
		next++
		return next - 1, true
	}
	t0 := time.Now()
	for range min(densityParallel, o.Workspaces) {
		wg.Go(func() {
			for {
				i, ok := claim()
				if !ok {
					return
				}
				cctx, cancel := context.WithTimeout(ctx, densityCreateTimeout)
				w, err := c.CreateWorkspace(cctx, pclient.CreateWorkspaceRequest{Name: fmt.Sprintf("bench-density-%d", i), Image: o.Image})
				if err == nil {
					err = execTrue(cctx, c, w.ID, "default")
				}
				cancel()
				mu.Lock()
				if w.ID != "" {
					made = append(made, w)
				}
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("workspace %d: %w", i+1, err)
				}
				n := len(made)
				mu.Unlock()
				if n%100 == 0 {
					fmt.Fprintf(o.Progress, "bench: density: %d created\n", n)
				}
			}
		})
	}
	wg.Wait()
	return made, time.Since(t0), firstErr
}

// memAvailable is this host's MemAvailable (/proc/meminfo), in bytes.
func memAvailable() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("read this host's free memory: %w", err)
	}
	return parseMemAvailable(b)
}

// parseMemAvailable finds "MemAvailable:  123 kB" in /proc/meminfo's text.
func parseMemAvailable(b []byte) (int64, error) {
	return parseKB(b, "MemAvailable", "/proc/meminfo")
}

// Pass: every workspace was created and answered within a second, and an
// idle one's memory is within issue 28's figure.
func (r DensityReport) Pass() bool {
	return r.Created == r.Workspaces && r.ExecErrors == 0 && r.Slow == 0 &&
		r.MemoryBytes > 0 && r.MemoryBytes <= TargetIdleWorkspaceBytes
}

// sidecarPerWorkspace is what the sidecar's RSS grew by for each created
// workspace.
func (r DensityReport) sidecarPerWorkspace() int64 {
	if r.Created == 0 {
		return 0
	}
	return (r.SidecarRSSBytes - r.SidecarRSSBeforeBytes) / int64(r.Created)
}

// driverNote names the storage driver and, for fuse-overlayfs, what it
// costs each container.
func driverNote(driver string) string {
	switch driver {
	case "":
		return "unknown"
	case "fuse-overlayfs":
		return driver + " (each container holds its own page cache of the image's files; overlay2 shares it)"
	}
	return driver
}

// WriteText prints the density run.
func (r DensityReport) WriteText(w io.Writer) error {
	verdict := func(ok bool) string {
		if ok {
			return "PASS"
		}
		return "MISS"
	}
	created := fmt.Sprintf("%d of %d in %.0f s", r.Created, r.Workspaces, r.CreateSecs)
	if r.CreateError != "" {
		created += " (then: " + r.CreateError + ")"
	}
	_, err := fmt.Fprintf(w, `idle workspaces created             %s   %s
idle workspace memory (docker stats) mean %s, largest %s (%d read)   target ≤ %s   %s
  less all its page cache           mean %s   target ≤ %s   %s
this host's memory per workspace    %s (MemAvailable before − after ÷ created; %s left)
the engine's storage driver         %s
the sidecar's RSS with them         %s (%s before them: %s a workspace)
one exec in each, after idling      p50 %s, p99 %s, max %s; over 1 s: %d, failed: %d   target all ≤ 1 s   %s
`,
		created, verdict(r.Created == r.Workspaces),
		fmtBytes(r.MemoryBytes), fmtBytes(r.MaxMemoryBytes), r.MemorySamples, fmtBytes(TargetIdleWorkspaceBytes), verdict(r.MemoryBytes > 0 && r.MemoryBytes <= TargetIdleWorkspaceBytes),
		fmtBytes(r.NoCacheBytes), fmtBytes(TargetIdleWorkspaceBytes), verdict(r.NoCacheBytes > 0 && r.NoCacheBytes <= TargetIdleWorkspaceBytes),
		fmtBytes(r.HostBytesPerWorkspace), fmtBytes(r.HostAvailableBytes),
		driverNote(r.StorageDriver),
		fmtBytes(r.SidecarRSSBytes), fmtBytes(r.SidecarRSSBeforeBytes), fmt.Sprintf("%.0f KB", float64(r.sidecarPerWorkspace())/1e3),
		fmtMS(r.Exec.P50MS), fmtMS(r.Exec.P99MS), fmtMS(r.Exec.MaxMS), r.Slow, r.ExecErrors, verdict(r.Created > 0 && r.Slow == 0 && r.ExecErrors == 0))
	return err
}
