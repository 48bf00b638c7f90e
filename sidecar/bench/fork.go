package bench

import (
	"context"
	"fmt"
	"time"

	pclient "github.com/patina-dev/patina/sidecar/client"
	"github.com/patina-dev/patina/sidecar/disk"
)

// Targets of a fork (issue 28): to its first exec, and the host disk it
// takes.
const (
	TargetForkMS     = 1000
	TargetForkDiskMB = 10
)

// Fork times forking a workspace whose container holds ForkBytes of
// installed files outside /workspace (written under /opt, as a package
// manager would, then written out to the host's disk: a workspace holding
// them, not one still writing them; see settle), until the fork's first
// exec returned; and the host disk
// the fork took then (the disk pool's used space after less before; -1:
// no pool to read).
type Fork struct {
	Bytes  int64   `json:"bytes"`
	MS     float64 `json:"ms"`
	DiskMB float64 `json:"disk_mb"`
}

func (r *runner) fork(ctx context.Context) (Fork, error) {
	f := Fork{Bytes: r.o.ForkBytes, DiskMB: -1}
	src, err := r.createWorkspace(ctx, "bench-fork")
	if err != nil {
		return f, err
	}
	defer r.deleteWorkspace(context.WithoutCancel(ctx), src.ID)
	mb := r.o.ForkBytes >> 20
	if err := r.out(ctx, src.ID, fmt.Sprintf("mkdir -p /opt/installed && for i in $(seq %d); do head -c 1048576 /dev/urandom > /opt/installed/f$i; done", mb)); err != nil {
		return f, fmt.Errorf("fill the workspace to fork: %w", err)
	}
	settle()
	before, poolOK := poolUsedBytes(disk.DefaultDir)
	t0 := time.Now()
	dst, err := r.c.ForkWorkspace(ctx, src.ID, pclient.ForkWorkspaceRequest{Name: "bench-forked"})
	if err != nil {
		return f, fmt.Errorf("fork: %w", err)
	}
	r.track(dst.ID)
	defer r.deleteWorkspace(context.WithoutCancel(ctx), dst.ID)
	if err := r.out(ctx, dst.ID, fmt.Sprintf("test $(ls /opt/installed | wc -l) -eq %d", mb)); err != nil {
		return f, fmt.Errorf("the fork's installed files: %w", err)
	}
	f.MS = ms(time.Since(t0))
	if after, ok := poolUsedBytes(disk.DefaultDir); ok && poolOK && dst.DiskMB > 0 {
		f.DiskMB = float64(after-before) / (1 << 20)
	}
	return f, nil
}
