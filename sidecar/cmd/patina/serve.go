//go:build !windows

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"syscall"

	"github.com/patina-dev/patina/sidecar"
	"github.com/patina-dev/patina/sidecar/budget"
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

// gcHeadroom is the sidecar's soft memory limit beyond its memory budget:
// its baseline (~20 MB) and room for the collector to work in. With the
// default budget (32 MiB) the limit is 80 MiB: under 40 concurrent 8 MB
// answers the sidecar's peak RSS was 81 MB with a limit of 96 MiB.
const gcHeadroom = 48 << 20

// serve runs the sidecar until ctx is cancelled (SIGINT, SIGTERM), then
// shuts its HTTP server down; containers and sessions keep running.
func (a *app) serve(ctx context.Context, s serveSettings) error {
	slog.SetDefault(s.Logger)
	// The sidecar's live memory is small and bounded (its memory budget,
	// --memory-budget, and a baseline of about 20 MB); a soft limit of the
	// budget and gcHeadroom makes the collector return what bursts used
	// before the heap doubles. GOMEMLIMIT overrides it.
	if s.MemoryBudgetMB <= 0 {
		s.MemoryBudgetMB = budget.DefaultSize >> 20
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(s.MemoryBudgetMB<<20 + gcHeadroom)
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
	if s.Engine == "swarm" && !s.Unencrypted {
		err := checkESP(ctx)
		if errors.Is(err, errESPUnchecked) {
			s.Logger.Warn("encrypted overlay networks: could not check that this kernel has IPsec ESP; if workspaces on other nodes never start, see --swarm-unencrypted", "err", err)
		} else if err != nil {
			return err
		}
	}
	svc, err := sidecar.New(sidecar.Config{
		Addr:              s.Addr,
		StateDir:          s.StateDir,
		Token:             s.Token,
		Logger:            s.Logger,
		Version:           version,
		DefaultImage:      s.Image,
		AgentTransport:    s.Transport,
		IdleStop:          s.IdleStop,
		Engine:            s.Engine,
		NodeBinary:        s.NodeBinary,
		NodeSocket:        s.NodeSocket,
		AgentBinary:       s.AgentBinary,
		SwarmUnencrypted:  s.Unencrypted,
		DefaultDiskMB:     s.DiskMB,
		DiskPoolMB:        s.DiskPoolMB,
		DiskDir:           s.DiskDir,
		MemoryBudgetBytes: s.MemoryBudgetMB << 20,
		DNS:               s.DNS,
		Runtime:           s.Runtime,
		WarmPool:          s.WarmPool,
		WarmTemplates:     s.WarmTemplates,
		SnapshotMaxBytes:  s.SnapshotMaxMB << 20,
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
	if s.MetricsAddr != "" {
		stop, err := serveMetrics(s.MetricsAddr, svc.MetricsHandler(), s.Logger)
		if err != nil {
			_ = svc.Shutdown(context.WithoutCancel(ctx))
			return err
		}
		defer stop()
	}
	announce(a.stderr, svc.Addr(), s.StateDir)
	if s.SystemDir != "" {
		pub, note, err := publishSystem(s.SystemDir, s.Group, svc.Addr(), svc.Token())
		switch {
		case err != nil:
			s.Logger.Warn("could not publish the address and token for the machine's users; they need --addr and --token", "err", err)
		case note != "":
			s.Logger.Warn(note, "system_dir", s.SystemDir)
		default:
			s.Logger.Info("published the address and the token for the members of the group", "system_dir", s.SystemDir, "group", s.Group)
		}
		defer pub.unpublish()
	}
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

// serveMetrics serves the metrics, without a token, on addr (--metrics-addr)
// until stop is called.
func serveMetrics(addr string, h http.Handler, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: metricsReadHeader}
	go func() { _ = srv.Serve(ln) }()
	log.Info("metrics", "addr", ln.Addr().String(), "path", "/metrics")
	return func() { _ = srv.Close() }, nil
}
