package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/docker/docker/api/types/container"

	pclient "github.com/patina-dev/patina/sidecar/client"
)

// TargetIdleWorkspaceBytes is issue 28's figure for one idle workspace.
const TargetIdleWorkspaceBytes = 6_000_000

// IdleWorkspace is one idle workspace (its init, its agent and one idle
// shell), made by a sidecar of its own that ships serve's default agent:
// its container's memory two ways, and how many such workspaces the
// engine's memory holds.
type IdleWorkspace struct {
	// Agent is the file name of the agent binary its sidecar shipped:
	// patina-agent when one is beside patina, else patina itself.
	Agent string `json:"agent"`
	// MemoryBytes is as `docker stats` shows it: the cgroup's usage less
	// its inactive file pages, which the kernel reclaims first.
	MemoryBytes int64 `json:"memory_bytes"`
	// NoCacheBytes is the cgroup's usage less all of its page cache: the
	// processes' own memory and the kernel's share for them, without the
	// file pages they read (on a fuse-overlayfs engine each container
	// reads the image's bash and libc into a page cache of its own; on
	// overlay2 those pages are shared).
	NoCacheBytes      int64 `json:"no_cache_bytes"`
	EngineMemoryBytes int64 `json:"engine_memory_bytes"`
	// Fit is EngineMemoryBytes / MemoryBytes: the count of idle workspaces
	// whose memory fits on the engine's host (the sidecar, the engine and
	// the page cache left out).
	Fit int64 `json:"fit"`
}

// idleWorkspace starts a sidecar with serve's default agent, creates a
// workspace, runs one command in its default session, lets it idle and
// reads its container's memory.
func (r *runner) idleWorkspace(ctx context.Context) (IdleWorkspace, error) {
	agent := defaultAgent(ctx, r.o.Binary)
	out := IdleWorkspace{Agent: filepath.Base(agent)}
	dir := filepath.Join(r.root, "idle-state")
	p, err := startSidecar(ctx, r.o.Binary, dir, filepath.Join(r.root, "idle.log"), r.o.Image, r.o.StartTimeout, "--agent-binary", agent)
	if err != nil {
		return out, err
	}
	defer func() {
		p.stop()
		_ = removeContainers(context.WithoutCancel(ctx), r.api, dir)
	}()
	c := pclient.New(p.Addr, p.Token, nil)
	ws, err := c.CreateWorkspace(ctx, pclient.CreateWorkspaceRequest{Name: "bench-idle", Image: r.o.Image})
	if err != nil {
		return out, fmt.Errorf("create workspace bench-idle: %w", err)
	}
	defer func() { _ = c.DeleteWorkspace(context.WithoutCancel(ctx), ws.ID, pclient.DeleteOptions{}) }()
	if err := execTrue(ctx, c, ws.ID, "default"); err != nil {
		return out, fmt.Errorf("exec in %s: %w", ws.Name, err)
	}
	select {
	case <-ctx.Done():
		return out, ctx.Err()
	case <-time.After(idleSettle):
	}
	m, err := containerMemory(ctx, r.api, ws.ContainerID)
	if err != nil {
		return out, err
	}
	out.MemoryBytes, out.NoCacheBytes = m.Stats, m.NoCache
	info, err := r.api.Info(ctx)
	if err != nil {
		return out, fmt.Errorf("ask the engine for its memory: %w", err)
	}
	out.EngineMemoryBytes = info.MemTotal
	if out.MemoryBytes > 0 {
		out.Fit = out.EngineMemoryBytes / out.MemoryBytes
	}
	return out, nil
}

// statsTimeout bounds reading one container's stats from the engine.
const statsTimeout = 30 * time.Second

// memUse is a container's memory two ways.
type memUse struct {
	// Stats is as `docker stats` computes it: usage less inactive file
	// pages (cgroup v2 "inactive_file", v1 "total_inactive_file").
	Stats int64
	// NoCache is usage less all page cache (v2 "file", v1 "total_cache").
	NoCache int64
}

// containerMemory reads a container's memory from the engine's stats.
func containerMemory(ctx context.Context, api DockerAPI, id string) (memUse, error) {
	ctx, cancel := context.WithTimeout(ctx, statsTimeout)
	defer cancel()
	resp, err := api.ContainerStatsOneShot(ctx, id)
	if err != nil {
		return memUse{}, fmt.Errorf("read the container's stats: %w", err)
	}
	defer resp.Body.Close()
	var st container.StatsResponse
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&st); err != nil {
		return memUse{}, fmt.Errorf("read the container's stats: %w", err)
	}
	usage := st.MemoryStats.Usage
	if usage == 0 {
		return memUse{}, fmt.Errorf("the engine reports no memory usage for container %s", id)
	}
	less := func(v1, v2 string) int64 {
		cache, ok := st.MemoryStats.Stats[v1]
		if !ok {
			cache = st.MemoryStats.Stats[v2]
		}
		if cache < usage {
			return int64(usage - cache)
		}
		return int64(usage)
	}
	return memUse{Stats: less("total_inactive_file", "inactive_file"), NoCache: less("total_cache", "file")}, nil
}
