package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/docker/docker/api/types/container"
)

// TargetIdleWorkspaceBytes is issue 28's figure for one idle workspace.
const TargetIdleWorkspaceBytes = 6_000_000

// IdleWorkspace is one idle workspace (its init, its agent and one idle
// shell): its container's memory as `docker stats` shows it (the cgroup's
// usage less its inactive file pages, which the kernel reclaims first),
// and how many such workspaces the engine's memory holds.
type IdleWorkspace struct {
	MemoryBytes       int64 `json:"memory_bytes"`
	EngineMemoryBytes int64 `json:"engine_memory_bytes"`
	// Fit is EngineMemoryBytes / MemoryBytes: the count of idle workspaces
	// whose memory fits on the engine's host (the sidecar, the engine and
	// the page cache left out).
	Fit int64 `json:"fit"`
}

// idleWorkspace creates a workspace, runs one command in its default
// session, lets it idle and reads its container's memory.
func (r *runner) idleWorkspace(ctx context.Context) (IdleWorkspace, error) {
	var out IdleWorkspace
	ws, err := r.createWorkspace(ctx, "bench-idle")
	if err != nil {
		return out, err
	}
	defer func() { _ = r.deleteWorkspace(context.WithoutCancel(ctx), ws.ID) }()
	if err := execTrue(ctx, r.c, ws.ID, "default"); err != nil {
		return out, fmt.Errorf("exec in %s: %w", ws.Name, err)
	}
	select {
	case <-ctx.Done():
		return out, ctx.Err()
	case <-time.After(idleSettle):
	}
	if out.MemoryBytes, err = containerMemory(ctx, r.api, ws.ContainerID); err != nil {
		return out, err
	}
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

// containerMemory is a container's memory as `docker stats` computes it:
// usage less inactive file pages (cgroup v2 "inactive_file", v1
// "total_inactive_file").
func containerMemory(ctx context.Context, api DockerAPI, id string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, statsTimeout)
	defer cancel()
	resp, err := api.ContainerStatsOneShot(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("read the container's stats: %w", err)
	}
	defer resp.Body.Close()
	var st container.StatsResponse
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&st); err != nil {
		return 0, fmt.Errorf("read the container's stats: %w", err)
	}
	usage := st.MemoryStats.Usage
	cache := st.MemoryStats.Stats["inactive_file"]
	if v, ok := st.MemoryStats.Stats["total_inactive_file"]; ok {
		cache = v
	}
	if usage == 0 {
		return 0, fmt.Errorf("the engine reports no memory usage for container %s", id)
	}
	if cache < usage {
		usage -= cache
	}
	return int64(usage), nil
}
