package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"syscall"

	"github.com/patina-dev/patina/sidecar"
)

// serveProcs is how many threads at once the sidecar runs Go code on, of
// the n the runtime would use: a quarter, at least one. The sidecar's share
// of an exec is small (an HTTP request and a frame each way; the shells,
// the agents and git do the work, in their own processes), and each exec
// hands its request between a few goroutines. With more Ps than it needs,
// every handoff wakes an idle thread on another CPU, which on a VM costs
// tens of µs: on a 2-CPU VM, one P made sequential execs through the API
// 5-25% faster and concurrent exec/s no lower (sidecar/DESIGN.md).
// GOMAXPROCS in the environment overrides it.
func serveProcs(n int) int {
	return max(1, n/4)
}

// serve runs the sidecar until ctx is cancelled (SIGINT, SIGTERM), then
// shuts its HTTP server down; containers and sessions keep running.
func (a *app) serve(ctx context.Context, s serveSettings) error {
	slog.SetDefault(s.Logger)
	// The sidecar's live memory is small and bounded; a soft limit makes
	// the collector return what bursts (a flood of output, a large diff)
	// used. GOMEMLIMIT overrides it.
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(96 << 20)
	}
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(serveProcs(runtime.GOMAXPROCS(0)))
	}
	if !loopback(s.Addr) {
		s.Logger.Warn("listening on a non-loopback address: anyone who can reach it and has the token can run commands", "addr", s.Addr)
	}
	if err := checkNotRunning(ctx, s.StateDir); err != nil {
		return err
	}
	svc, err := sidecar.New(sidecar.Config{
		Addr:             s.Addr,
		StateDir:         s.StateDir,
		Token:            s.Token,
		Logger:           s.Logger,
		Version:          version,
		DefaultImage:     s.Image,
		AgentTransport:   s.Transport,
		IdleStop:         s.IdleStop,
		Engine:           s.Engine,
		NodeBinary:       s.NodeBinary,
		SwarmUnencrypted: s.Unencrypted,
		DefaultDiskMB:    s.DiskMB,
		DiskPoolMB:       s.DiskPoolMB,
		DiskDir:          s.DiskDir,
		DNS:              s.DNS,
	})
	if err != nil {
		return err
	}
	if err := svc.Start(ctx); err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("%w\nSomething listens on %s already: pass another --addr (port 0 picks a free one)", err, s.Addr)
		}
		return err
	}
	announce(a.stderr, svc.Addr(), s.StateDir)
	select {
	case <-ctx.Done():
		s.Logger.Info("shutting down; workspaces and sessions keep running")
	case <-svc.Done():
		return errors.New("the sidecar stopped unexpectedly")
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.ShutdownTimeout)
	defer cancel()
	if err := svc.Shutdown(sctx); err != nil {
		return fmt.Errorf("shut down: %w", err)
	}
	return nil
}
