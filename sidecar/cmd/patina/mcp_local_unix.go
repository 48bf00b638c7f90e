//go:build !windows

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/patina-dev/patina/sidecar"
)

// startLocalSidecar starts a sidecar in this process.
func startLocalSidecar(ctx context.Context, req localSidecarRequest) (localSidecar, error) {
	svc, err := sidecar.New(sidecar.Config{Addr: req.Addr, StateDir: req.StateDir, Token: req.Token, Logger: req.Logger, Version: version})
	if err != nil {
		return nil, err
	}
	if err := svc.Start(ctx); err != nil {
		return nil, err
	}
	return svc, nil
}

// lockFile takes an exclusive flock on path, polling until ctx ends.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // closing releases the lock
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, ctx.Err())
		case <-time.After(lockPoll):
		}
	}
}
