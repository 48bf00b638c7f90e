package main

import "context"

// startLocalSidecar: Windows runs no sidecar.
func startLocalSidecar(context.Context, localSidecarRequest) (localSidecar, error) {
	return nil, errNoLocalSidecar
}

// lockFile: no lock is needed where no sidecar is started.
func lockFile(context.Context, string) (unlock func(), err error) { return func() {}, nil }
