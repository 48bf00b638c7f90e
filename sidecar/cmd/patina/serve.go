package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"syscall"

	"github.com/patina-dev/patina/sidecar"
)

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
