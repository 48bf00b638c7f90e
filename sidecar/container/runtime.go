package container

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Runtimes patina knows. Any other name the engine has registered works
// too, with the transports that runc allows.
const (
	// RuntimeRunc is Docker's default OCI runtime: namespaces and cgroups
	// on the host's kernel.
	RuntimeRunc = "runc"
	// RuntimeRunsc is gVisor: the workspace's processes talk to a kernel
	// in user space (the Sentry), not to the host's; only a small,
	// filtered set of host system calls remains.
	RuntimeRunsc = "runsc"
)

// transportFor is the agent transport a runtime allows: gVisor keeps
// its own network stack and its own view of processes, so the netns
// transport (which enters the container's namespaces from the host)
// cannot reach an agent there; the exec relay, through the engine, can.
func transportFor(runtime, transport string) (string, error) {
	if runtime != RuntimeRunsc {
		return transport, nil
	}
	switch transport {
	case "", "auto", "exec":
		return "exec", nil
	}
	return "", fmt.Errorf("agent transport %s cannot reach an agent under runtime runsc (gVisor keeps its own network stack): use --agent-transport exec or auto", transport)
}

// checkRuntime makes sure the engine has the runtime workspaces are to
// run on, so a missing one is said at start, with what to do, rather
// than at each create.
func (d *Docker) checkRuntime(ctx context.Context) error {
	if d.cfg.Runtime == "" || d.cfg.Runtime == RuntimeRunc {
		return nil
	}
	ia, ok := d.api.(infoAPI)
	if !ok {
		return nil // the create says so, if it is missing
	}
	info, err := ia.Info(ctx)
	if err != nil {
		return fmt.Errorf("ask the Docker engine for its runtimes: %w", err)
	}
	names := make([]string, 0, len(info.Runtimes))
	for name := range info.Runtimes {
		names = append(names, name)
	}
	slices.Sort(names)
	if slices.Contains(names, d.cfg.Runtime) {
		return nil
	}
	return fmt.Errorf("the Docker engine has no runtime %q (it has %s): install it (apt-get install runsc) and register it in the engine's daemon.json, \"runtimes\": {\"runsc\": {\"path\": \"/usr/bin/runsc\", \"runtimeArgs\": [\"--network=host\"]}}, then restart dockerd", d.cfg.Runtime, strings.Join(names, ", "))
}

// Check verifies, at the sidecar's start, what the engine must have for
// this configuration (the runtime asked for).
func (d *Docker) Check(ctx context.Context) error { return d.checkRuntime(ctx) }

// Runtime is the OCI runtime of workspaces' containers ("" the engine's
// default).
func (d *Docker) Runtime() string { return d.cfg.Runtime }
