package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// HostOptions configure the measurements of what this host holds:
// Density and Burst.
type HostOptions struct {
	// Binary is the patina executable (required); Image the workspaces'
	// image (default image.DefaultTag).
	Binary string
	Image  string
	// Workspaces is how many workspaces the measurement makes (required).
	Workspaces int
	// API is this host's Docker engine (required): the containers are
	// read and removed through it.
	API          DockerAPI
	Progress     io.Writer
	StartTimeout time.Duration
}

// cleanupPerWorkspace is added to cleanupTimeout per workspace made: a
// thousand containers take minutes to remove.
const cleanupPerWorkspace = time.Second

// prepare checks o and fills in its defaults; what names the measurement.
func (o *HostOptions) prepare(what string) error {
	if o.Binary == "" || o.API == nil || o.Workspaces <= 0 {
		return fmt.Errorf("bench %s: the binary, the engine and a positive count are required", what)
	}
	o.Image = cmp.Or(o.Image, Options{}.withDefaults().Image)
	o.StartTimeout = cmp.Or(o.StartTimeout, 30*time.Second)
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return nil
}

// startOwn starts a sidecar of the measurement's own (serve with extra
// flags) in a new temporary directory; done stops it and removes its
// workspaces' containers and the directory.
func (o HostOptions) startOwn(ctx context.Context, what string, extra ...string) (p *sidecarProc, done func(), err error) {
	root, err := os.MkdirTemp("", "patina-bench-"+what+"-")
	if err != nil {
		return nil, nil, err
	}
	stateDir := filepath.Join(root, "state")
	p, err = startSidecar(ctx, o.Binary, stateDir, filepath.Join(root, "serve.log"), o.Image, o.StartTimeout, extra...)
	if err != nil {
		os.RemoveAll(root)
		return nil, nil, err
	}
	return p, func() {
		p.stop()
		fmt.Fprintf(o.Progress, "bench: %s: removing the workspaces\n", what)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout+time.Duration(o.Workspaces)*cleanupPerWorkspace)
		_ = removeContainers(cctx, o.API, stateDir)
		cancel()
		os.RemoveAll(root)
	}, nil
}
