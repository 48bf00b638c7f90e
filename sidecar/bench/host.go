package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	pclient "github.com/patina-dev/patina/sidecar/client"
)

// HostOptions configure the measurements of what this host holds:
// Density and Burst.
type HostOptions struct {
	// Binary is the patina executable (required); Image the workspaces'
	// image (default image.DefaultTag).
	Binary string
	Image  string
	// AgentBinary is the agent the sidecar ships to its workspaces (serve
	// --agent-binary; default serve's: patina-agent beside Binary when
	// there is one that speaks its protocol, else Binary).
	AgentBinary string
	// Workspaces is how many workspaces the measurement makes (required).
	Workspaces int
	// API is this host's Docker engine (required): the containers are
	// read and removed through it.
	API          DockerAPI
	Progress     io.Writer
	StartTimeout time.Duration
}

// Cleanup timings.
const (
	// cleanupPerWorkspace is added to cleanupTimeout per workspace made: a
	// thousand containers take minutes to remove.
	cleanupPerWorkspace = time.Second
	// deleteTimeout bounds one workspace's delete through the sidecar.
	deleteTimeout = 2 * time.Minute
	// deleteParallel deletes run at once.
	deleteParallel = 4
)

// prepare checks o and fills in its defaults; what names the measurement.
func (o *HostOptions) prepare(what string) error {
	if o.Binary == "" || o.API == nil || o.Workspaces <= 0 {
		return fmt.Errorf("bench %s: the binary, the engine and a positive count are required", what)
	}
	o.Image = cmp.Or(o.Image, Options{}.withDefaults().Image)
	o.StartTimeout = cmp.Or(o.StartTimeout, defaultStartTimeout)
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return nil
}

// startOwn starts a sidecar of the measurement's own (serve with extra
// flags) in a new temporary directory; done deletes its workspaces through
// it (so that it stops empty and removes its network and firewall rules
// itself), stops it, removes what is left through the engine, and the
// directory.
func (o HostOptions) startOwn(ctx context.Context, what string, extra ...string) (p *sidecarProc, done func(), err error) {
	root, err := os.MkdirTemp("", "patina-bench-"+what+"-")
	if err != nil {
		return nil, nil, err
	}
	stateDir := filepath.Join(root, "state")
	extra = append(extra, "--agent-binary", cmp.Or(o.AgentBinary, defaultAgent(ctx, o.Binary)))
	p, err = startSidecar(ctx, o.Binary, stateDir, filepath.Join(root, "serve.log"), o.Image, o.StartTimeout, extra...)
	if err != nil {
		os.RemoveAll(root)
		return nil, nil, err
	}
	return p, func() {
		fmt.Fprintf(o.Progress, "bench: %s: removing the workspaces\n", what)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout+time.Duration(o.Workspaces)*cleanupPerWorkspace)
		defer cancel()
		deleteAll(cctx, pclient.New(p.Addr, p.Token, nil))
		p.stop()
		_ = removeContainers(cctx, o.API, stateDir)
		os.RemoveAll(root)
	}, nil
}

// deleteAll deletes every workspace of a sidecar (deleteEach).
func deleteAll(ctx context.Context, c *pclient.Client) {
	lctx, cancel := context.WithTimeout(ctx, deleteTimeout)
	list, err := c.ListWorkspaces(lctx)
	cancel()
	if err != nil {
		return
	}
	ids := make([]string, len(list))
	for i, w := range list {
		ids[i] = w.ID
	}
	deleteEach(ctx, c, ids)
}

// deleteEach deletes the workspaces ids, deleteParallel at a time, each
// within deleteTimeout; what fails is left to the engine's cleanup.
func deleteEach(ctx context.Context, c *pclient.Client, ids []string) {
	next := make(chan string)
	var wg sync.WaitGroup
	for range deleteParallel {
		wg.Go(func() {
			for id := range next {
				dctx, cancel := context.WithTimeout(ctx, deleteTimeout)
				_ = c.DeleteWorkspace(dctx, id, pclient.DeleteOptions{})
				cancel()
			}
		})
	}
	for _, id := range ids {
		next <- id
	}
	close(next)
	wg.Wait()
}
