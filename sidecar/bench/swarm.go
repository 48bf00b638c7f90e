package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"runtime"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"

	pclient "github.com/patina-dev/patina/sidecar/client"
	pcontainer "github.com/patina-dev/patina/sidecar/container"
)

// TargetSwarmExecRatio: exec p50 of a workspace on another node ÷ one on
// the sidecar's node, same run.
const TargetSwarmExecRatio = 1.5

// SwarmOptions configure RunSwarm. Zero fields take the defaults given.
type SwarmOptions struct {
	// Binary is the patina executable started as `Binary serve --engine
	// swarm` (required); NodeBinary is where every node has it (default
	// the sidecar's own default).
	Binary     string
	NodeBinary string
	// NodeSocket is where every node's Docker socket is (serve's
	// --swarm-node-socket; default: serve's default).
	NodeSocket string
	// Image is the workspaces' image (default image.DefaultTag); it must be
	// on every node.
	Image string
	// Samples is the number of sequential HTTP execs timed in each
	// workspace (default 300, after 50 warm-up); CreateSamples the number
	// of workspaces created on each node to time create → first exec
	// (default 3).
	Samples       int
	CreateSamples int
	// Unencrypted runs the sidecar with --swarm-unencrypted.
	Unencrypted bool
	Progress    io.Writer
	// StartTimeout bounds the sidecar's start (default 30 s).
	StartTimeout time.Duration
}

// SwarmAPI is what RunSwarm asks the manager: the nodes, and what a run
// left behind.
type SwarmAPI interface {
	DockerAPI
	Info(ctx context.Context) (system.Info, error)
	NodeList(ctx context.Context, options swarm.NodeListOptions) ([]swarm.Node, error)
	ServiceList(ctx context.Context, options swarm.ServiceListOptions) ([]swarm.Service, error)
	ServiceRemove(ctx context.Context, serviceID string) error
	NodeUpdate(ctx context.Context, nodeID string, version swarm.Version, node swarm.NodeSpec) error
}

var _ SwarmAPI = (*client.Client)(nil)

// SwarmReport is the outcome of RunSwarm. It marshals to JSON.
type SwarmReport struct {
	Version   string    `json:"version"`
	Image     string    `json:"image"`
	CPUs      int       `json:"cpus"`
	StartedAt time.Time `json:"started_at"`
	// Near is the sidecar's node, Far the other node measured.
	Near string `json:"near_node"`
	Far  string `json:"far_node"`
	// NearExec and FarExec: sequential HTTP execs of `true` in a workspace
	// on each node; Ratio is FarExec.P50MS ÷ NearExec.P50MS.
	NearExec Latency `json:"near_exec"`
	FarExec  Latency `json:"far_exec"`
	Ratio    float64 `json:"ratio"`
	// NearCreate and FarCreate: create → first exec on each node.
	NearCreate Latency `json:"near_create_to_first_exec"`
	FarCreate  Latency `json:"far_create_to_first_exec"`
	Checks     []Check `json:"checks"`
	DurationMS float64 `json:"duration_ms"`
}

// Pass reports whether every check passed.
func (r SwarmReport) Pass() bool { return allPass(r.Checks) }

// WriteText prints the report as a table.
func (r SwarmReport) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "patina bench --engine swarm: sidecar %s, image %s, %d CPUs, %s, took %s\n",
		r.Version, r.Image, r.CPUs, r.StartedAt.Local().Format(time.DateTime),
		time.Duration(r.DurationMS*float64(time.Millisecond)).Round(100*time.Millisecond))
	fmt.Fprintf(w, "near: the sidecar's node %s; far: node %s\n\n", r.Near, r.Far)
	rows := [][]string{{"FIGURE", "VALUE", "TARGET", "RESULT"}}
	for _, c := range r.Checks {
		rows = append(rows, c.cells())
	}
	rows = append(rows,
		[]string{fmt.Sprintf("HTTP exec p50 / p90, near (%d samples)", r.NearExec.Samples), fmtMS(r.NearExec.P50MS) + " / " + fmtMS(r.NearExec.P90MS), "", ""},
		[]string{fmt.Sprintf("HTTP exec p50 / p90, far (%d samples)", r.FarExec.Samples), fmtMS(r.FarExec.P50MS) + " / " + fmtMS(r.FarExec.P90MS), "", ""},
		[]string{fmt.Sprintf("create → first exec p50, near (%d samples)", r.NearCreate.Samples), fmtMS(r.NearCreate.P50MS), "", ""},
		[]string{fmt.Sprintf("create → first exec p50, far (%d samples)", r.FarCreate.Samples), fmtMS(r.FarCreate.P50MS), "", ""},
	)
	if err := writeTable(w, rows); err != nil {
		return err
	}
	return writeVerdict(w, r.Pass())
}

// RunSwarm starts a sidecar with --engine swarm on this host (a manager of
// a swarm with another ready node), and times exec and create → first
// exec in a workspace on this node and in one on another node.
func RunSwarm(ctx context.Context, api SwarmAPI, opts SwarmOptions) (rep SwarmReport, err error) {
	o := Options{Binary: opts.Binary, Image: opts.Image, Samples: opts.Samples, CreateSamples: opts.CreateSamples,
		Progress: opts.Progress, StartTimeout: opts.StartTimeout, Docker: api}.withDefaults()
	if opts.Samples <= 0 {
		o.Samples = 300
	}
	if opts.CreateSamples <= 0 {
		o.CreateSamples = 3
	}
	o.Warmup = 50
	if o.Binary == "" {
		return rep, errors.New("bench: SwarmOptions.Binary is required")
	}
	rep = SwarmReport{Image: o.Image, CPUs: runtime.NumCPU(), StartedAt: time.Now()}
	if err := checkImage(ctx, api, o.Image); err != nil {
		return rep, err
	}
	near, far, err := swarmNodes(ctx, api)
	if err != nil {
		return rep, err
	}
	rep.Near, rep.Far = near.Description.Hostname+" ("+near.ID[:12]+")", far.Description.Hostname+" ("+far.ID[:12]+")"

	r, err := newRunner(o, api)
	if err != nil {
		return rep, err
	}
	stateDir := r.stateDir
	defer func() {
		cerr := r.cleanup(r.root)
		if serr := removeServices(context.WithoutCancel(ctx), api, stateDir); cerr == nil {
			cerr = serr
		}
		if lerr := removeNodeLabel(context.WithoutCancel(ctx), api, pcontainer.AgentLabelKey(stateDir)); cerr == nil {
			cerr = lerr
		}
		if cerr != nil && err == nil {
			err = cerr
		}
	}()
	args := []string{"--engine", "swarm"}
	if opts.NodeBinary != "" {
		args = append(args, "--node-binary", opts.NodeBinary)
	}
	if opts.NodeSocket != "" {
		args = append(args, "--swarm-node-socket", opts.NodeSocket)
	}
	if opts.Unencrypted {
		args = append(args, "--swarm-unencrypted")
	}
	r.progress("starting a sidecar (%s serve --engine swarm, state in %s)", o.Binary, stateDir)
	r.proc, err = startSidecar(ctx, o.Binary, stateDir, filepath.Join(r.root, "sidecar.log"), o.Image, o.StartTimeout, args...)
	if err != nil {
		return rep, err
	}
	rep.Version = r.proc.Version
	r.c = pclient.New(r.proc.Addr, r.proc.Token, nil)

	for _, side := range []struct {
		node   swarm.Node
		name   string
		create *Latency
		exec   *Latency
	}{{near, "near", &rep.NearCreate, &rep.NearExec}, {far, "far", &rep.FarCreate, &rep.FarExec}} {
		placement := []string{"node.id==" + side.node.ID}
		r.progress("%d × create → first exec on %s (%s)", o.CreateSamples, side.name, side.node.Description.Hostname)
		if *side.create, err = r.createToFirstExecOn(ctx, "bench-create-"+side.name, placement); err != nil {
			return rep, err
		}
		ws, err := r.createWorkspaceOn(ctx, "bench-"+side.name, placement)
		if err != nil {
			return rep, err
		}
		r.progress("%d sequential HTTP execs of `true` on %s", o.Samples, side.name)
		if *side.exec, _, err = r.httpExecs(ctx, ws.ID); err != nil {
			return rep, err
		}
	}
	if rep.NearExec.P50MS > 0 {
		rep.Ratio = rep.FarExec.P50MS / rep.NearExec.P50MS
	}
	rep.Checks = []Check{{"exec p50, other node ÷ sidecar's node", fmt.Sprintf("%.2f×", rep.Ratio),
		fmt.Sprintf("≤ %g×", TargetSwarmExecRatio), rep.Ratio > 0 && rep.Ratio <= TargetSwarmExecRatio}}
	rep.DurationMS = ms(time.Since(rep.StartedAt))
	return rep, nil
}

// swarmNodes finds this engine's node and another ready, active one.
func swarmNodes(ctx context.Context, api SwarmAPI) (near, far swarm.Node, err error) {
	info, err := api.Info(ctx)
	if err != nil {
		return near, far, fmt.Errorf("docker: %w", err)
	}
	if !info.Swarm.ControlAvailable {
		return near, far, errors.New("bench --engine swarm: this Docker engine is not a swarm manager (docker swarm init)")
	}
	nodes, err := api.NodeList(ctx, swarm.NodeListOptions{})
	if err != nil {
		return near, far, fmt.Errorf("list the swarm's nodes: %w", err)
	}
	for _, n := range nodes {
		ready := n.Status.State == swarm.NodeStateReady && n.Spec.Availability == swarm.NodeAvailabilityActive
		switch {
		case n.ID == info.Swarm.NodeID:
			near = n
		case ready && far.ID == "":
			far = n
		}
	}
	if near.ID == "" || far.ID == "" {
		return near, far, fmt.Errorf("bench --engine swarm needs this node and another ready, active node (the swarm has %d)", len(nodes))
	}
	return near, far, nil
}

// removeNodeLabel takes off the nodes the label the run's sidecar set on
// those whose binary it checked.
func removeNodeLabel(ctx context.Context, api SwarmAPI, key string) error {
	ctx, cancel := context.WithTimeout(ctx, cleanupTimeout)
	defer cancel()
	nodes, err := api.NodeList(ctx, swarm.NodeListOptions{})
	if err != nil {
		return fmt.Errorf("list the swarm's nodes: %w", err)
	}
	var errs []error
	for _, n := range nodes {
		if _, ok := n.Spec.Labels[key]; !ok {
			continue
		}
		spec := n.Spec
		spec.Labels = maps.Clone(spec.Labels)
		delete(spec.Labels, key)
		if err := api.NodeUpdate(ctx, n.ID, n.Version, spec); err != nil {
			errs = append(errs, fmt.Errorf("remove the label %s of node %s: %w", key, n.ID, err))
		}
	}
	return errors.Join(errs...)
}

// removeServices removes the services a run's sidecar left.
func removeServices(ctx context.Context, api SwarmAPI, stateDir string) error {
	ctx, cancel := context.WithTimeout(ctx, cleanupTimeout)
	defer cancel()
	svcs, err := api.ServiceList(ctx, swarm.ServiceListOptions{Filters: filters.NewArgs(
		filters.Arg("label", pcontainer.LabelStateDir+"="+stateDir))})
	if err != nil {
		return fmt.Errorf("list the run's services: %w", err)
	}
	var errs []error
	for _, s := range svcs {
		if err := api.ServiceRemove(ctx, s.ID); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
