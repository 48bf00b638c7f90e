//go:build !windows

package main

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/patina-dev/patina/sidecar/client"
)

// checkNotRunning fails when a sidecar already serves stateDir: its
// sidecar.json names a live process that answers at the address. Two
// sidecars on one state directory would fight over its workspaces.
func checkNotRunning(ctx context.Context, stateDir string) error {
	d, ok, err := readDiscovery(stateDir)
	if err != nil || !ok || d.PID <= 0 {
		return nil // nothing (readable) there: a stale or broken file is overwritten
	}
	if err := syscall.Kill(d.PID, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return nil // that process is gone
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if client.New(d.Addr, "", nil).Health(ctx) != nil {
		return nil // something else has the pid now, or it is not serving
	}
	return fmt.Errorf("a sidecar already serves %s: pid %d at %s\n"+
		"Stop it first, or give this one another --state-dir", stateDir, d.PID, d.Addr)
}
