package container

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"

	"github.com/patina-dev/patina/sidecar/engine"
)

// SwarmAPI is the part of the Docker client the Swarm engine uses: a
// manager's API, on the sidecar's host.
type SwarmAPI interface {
	API
	Info(ctx context.Context) (system.Info, error)
	ServiceCreate(ctx context.Context, spec swarm.ServiceSpec, options swarm.ServiceCreateOptions) (swarm.ServiceCreateResponse, error)
	ServiceInspectWithRaw(ctx context.Context, serviceID string, opts swarm.ServiceInspectOptions) (swarm.Service, []byte, error)
	ServiceUpdate(ctx context.Context, serviceID string, version swarm.Version, spec swarm.ServiceSpec, options swarm.ServiceUpdateOptions) (swarm.ServiceUpdateResponse, error)
	ServiceRemove(ctx context.Context, serviceID string) error
	ServiceList(ctx context.Context, options swarm.ServiceListOptions) ([]swarm.Service, error)
	TaskList(ctx context.Context, options swarm.TaskListOptions) ([]swarm.Task, error)
	SecretCreate(ctx context.Context, spec swarm.SecretSpec) (swarm.SecretCreateResponse, error)
	SecretList(ctx context.Context, options swarm.SecretListOptions) ([]swarm.Secret, error)
	SecretRemove(ctx context.Context, id string) error
	NetworkConnect(ctx context.Context, networkID, containerID string, config *network.EndpointSettings) error
	NetworkDisconnect(ctx context.Context, networkID, containerID string, force bool) error
	NetworkRemove(ctx context.Context, networkID string) error
	NodeInspectWithRaw(ctx context.Context, nodeID string) (swarm.Node, []byte, error)
	NodeList(ctx context.Context, options swarm.NodeListOptions) ([]swarm.Node, error)
	NodeUpdate(ctx context.Context, nodeID string, version swarm.Version, node swarm.NodeSpec) error
}

var _ SwarmAPI = (*client.Client)(nil)

// ErrUnsupported: engine.ErrUnsupported.
var ErrUnsupported = engine.ErrUnsupported

// ErrNodeDown: engine.ErrNodeDown.
var ErrNodeDown = engine.ErrNodeDown

// ErrNotPlaced: engine.ErrNotPlaced.
var ErrNotPlaced = engine.ErrNotPlaced

// Where a Swarm workspace's agent listens (on its own overlay network) and
// finds its token.
const (
	swarmAgentPort  = 7071
	swarmTokenFile  = "/run/secrets/patina-agent-token"
	swarmTokenName  = "patina-agent-token"
	defaultNodeBin  = "/usr/local/lib/patina/patina"
	swarmRoleRelay  = "relay"
	swarmWaitPeriod = 200 * time.Millisecond
)

// SwarmConfig configures the Swarm engine.
type SwarmConfig struct {
	// StateDir labels what this sidecar owns.
	StateDir string
	// Binary is the patina binary of this host (default: this process's
	// executable), shipped into the relay container.
	Binary string
	// NodeBinary is where every node has the same patina binary, static
	// (default /usr/local/lib/patina/patina): mounted read-only into each
	// workspace, whose agent runs from it.
	NodeBinary string
	// NodeSocket is where every node's Docker socket is (default
	// /var/run/docker.sock): a deleted workspace's volumes are removed on
	// its node by a one-shot task of patina's own that mounts it
	// (swarm_volumes.go).
	NodeSocket string
	// Unencrypted leaves the workspaces' overlay networks unencrypted
	// (they are encrypted, IPsec between nodes, unless this is set).
	Unencrypted bool
	Logger      *slog.Logger
}

// Swarm runs each workspace as a Docker Swarm service of one replica,
// placed by Swarm (with the request's placement constraints) and then
// pinned to the node it landed on, where its volumes are. Its agent runs
// as the container's kept command and listens on TCP on the workspace's
// own overlay network, with a per-workspace token given as a Swarm secret.
// The sidecar, on a manager host, reaches it from the network namespace
// of a relay container on this host that is attached to each workspace's
// network: no node's Docker socket is needed but the manager's own.
type Swarm struct {
	api   SwarmAPI
	cfg   SwarmConfig
	log   *slog.Logger
	local *Docker // this host's engine: the relay container

	relayMu  sync.Mutex
	relayID  string
	attached map[string]bool // overlay networks the relay is on

	checks nodeChecks // of the nodes' binaries (swarm_verify.go)
}

// NewSwarm returns the Swarm engine. api must reach a manager of the swarm
// whose engine runs on this host.
func NewSwarm(api SwarmAPI, cfg SwarmConfig) (*Swarm, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.NodeBinary == "" {
		cfg.NodeBinary = defaultNodeBin
	}
	if cfg.NodeSocket == "" {
		cfg.NodeSocket = defaultNodeSocket
	}
	if cfg.Binary == "" && runtime.GOOS == "linux" {
		// The whole binary, not a patina-agent beside it: the volume
		// cleanup on the nodes runs `agent remove-volumes` from it.
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find the patina binary to ship into workspaces: %w", err)
		}
		cfg.Binary = exe
	}
	local, err := New(api, Config{StateDir: cfg.StateDir, Binary: cfg.Binary, Transport: "netns", Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	if !local.Local() {
		return nil, errors.New("the swarm engine needs a manager's engine on this host (DOCKER_HOST must be a local socket): the sidecar reaches workspaces through a relay container here")
	}
	if local.agent.dynamic {
		return nil, errors.New("the swarm engine needs a static patina binary (CGO_ENABLED=0 go build ./sidecar/cmd/patina): the same binary runs on every node, and the relay and the nodes' checks run it in an image of patina's own, which has no libc")
	}
	return &Swarm{api: api, cfg: cfg, log: cfg.Logger.With("component", "swarm"), local: local, attached: map[string]bool{}}, nil
}

// Check says whether the engine is a swarm manager.
func (s *Swarm) Check(ctx context.Context) error {
	info, err := s.api.Info(ctx)
	if err != nil {
		return err
	}
	if !info.Swarm.ControlAvailable {
		return fmt.Errorf("--engine swarm: this Docker engine is not a swarm manager (swarm state %q): run `docker swarm init` here, or point DOCKER_HOST at a manager on this host", info.Swarm.LocalNodeState)
	}
	s.removeChecks(ctx)
	// The image that checks each node's binary: made here, and named for
	// the operator, who puts it on every node.
	im, err := s.agentImage()
	if err != nil {
		return err
	}
	id, err := ensureOwnImage(ctx, s.api, im)
	if err != nil {
		return fmt.Errorf("patina's agent image: %w", err)
	}
	s.log.Info("workspaces run on nodes whose binary patina checked with its agent image: every node needs that image and this binary at --node-binary",
		"image", im.tag, "image_id", short(strings.TrimPrefix(id, "sha256:")), "node_binary", s.cfg.NodeBinary,
		"how", "on each node: patina image agent --binary "+s.cfg.NodeBinary+" (or docker save "+im.tag+" | docker load)")
	s.checkNodesSoon()
	// Bounded on its own: what it cannot remove in time stays, logged.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sweepTimeout)
	defer cancel()
	s.sweepLeftovers(sctx)
	return nil
}

// Local is false: a workspace may land on another node, so no host
// directory can be mounted into it.
func (s *Swarm) Local() bool { return false }

// Transport is how the agent is reached.
func (s *Swarm) Transport() string { return "swarm" }

func (s *Swarm) labels(workspaceID string) map[string]string {
	return map[string]string{LabelManaged: "1", LabelWorkspace: workspaceID, LabelStateDir: s.cfg.StateDir}
}

// Inspect reports the service's state: running when a task of it runs.
func (s *Swarm) Inspect(ctx context.Context, id string) (State, error) {
	svc, _, err := s.api.ServiceInspectWithRaw(ctx, id, swarm.ServiceInspectOptions{})
	if errdefs.IsNotFound(err) {
		return State{}, fmt.Errorf("service %s: %w", short(id), ErrNotFound)
	}
	if err != nil {
		return State{}, err
	}
	st := State{ID: svc.ID, Status: "exited"}
	ts, err := s.tasks(ctx, id)
	if err != nil {
		return State{}, err
	}
	for _, t := range ts {
		if t.Status.State == swarm.TaskStateRunning {
			if why := s.nodeProblem(ctx, svc); why != "" {
				// A task on a node that is down still reads running.
				return State{ID: svc.ID, Status: "exited", Error: why}, nil
			}
			return State{ID: svc.ID, Running: true, Status: "running"}, nil
		}
		st.Error = "its task is " + taskWhy(t)
	}
	if r := svc.Spec.Mode.Replicated; r != nil && r.Replicas != nil && *r.Replicas == 0 {
		st.Error = ""
	}
	if why := s.nodeProblem(ctx, svc); why != "" {
		st.Error = why
	}
	return st, nil
}

// List finds the services of this state directory's workspaces.
func (s *Swarm) List(ctx context.Context) ([]Owned, error) {
	svcs, err := s.api.ServiceList(ctx, swarm.ServiceListOptions{Filters: filters.NewArgs(
		filters.Arg("label", LabelManaged+"=1"), filters.Arg("label", LabelStateDir+"="+s.cfg.StateDir))})
	if err != nil {
		return nil, fmt.Errorf("list services: %w", err)
	}
	// One task list for all of them: which have a running task.
	running := map[string]bool{}
	if len(svcs) > 0 {
		ts, err := s.api.TaskList(ctx, swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("desired-state", "running"))})
		if err != nil {
			return nil, fmt.Errorf("list tasks: %w", err)
		}
		for _, t := range ts {
			if t.Status.State == swarm.TaskStateRunning {
				running[t.ServiceID] = true
			}
		}
	}
	out := make([]Owned, 0, len(svcs))
	for _, svc := range svcs {
		out = append(out, Owned{
			ID: svc.ID, WorkspaceID: svc.Spec.Labels[LabelWorkspace], Name: svc.Spec.Labels[LabelName],
			StateDir: svc.Spec.Labels[LabelStateDir], Running: running[svc.ID],
		})
	}
	return out, nil
}

// Watch polls the services every watchPoll (task changes are not events
// a manager reports) and calls fn with "start", "die" or "destroy" when a
// workspace's task starts, stops running or its service goes.
func (s *Swarm) Watch(ctx context.Context, fn func(workspaceID, containerID, action string)) {
	seen := map[string]Owned{}
	for {
		if owned, err := s.List(ctx); err == nil {
			now := map[string]Owned{}
			for _, o := range owned {
				now[o.ID] = o
				prev, ok := seen[o.ID]
				switch {
				case o.Running && (!ok || !prev.Running):
					fn(o.WorkspaceID, o.ID, "start")
				case !o.Running && ok && prev.Running:
					fn(o.WorkspaceID, o.ID, "die")
				}
			}
			for id, o := range seen {
				if _, ok := now[id]; !ok {
					fn(o.WorkspaceID, id, "destroy")
				}
			}
			seen = now
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(watchPoll):
		}
	}
}

// Commit, CopyVolumes and RemoveImage (fork) need the node's engine.
func (s *Swarm) Commit(context.Context, string, string, string) error {
	return fmt.Errorf("%w: fork of a swarm workspace (its container is on another node's engine)", ErrUnsupported)
}

func (s *Swarm) CopyVolumes(context.Context, CopySpec) error {
	return fmt.Errorf("%w: fork of a swarm workspace (its volumes are on another node)", ErrUnsupported)
}

func (s *Swarm) RemoveImage(context.Context, string) error { return nil }

// DiskSupport: a swarm workspace's container is on another node's engine,
// where the sidecar mounts nothing.
func (s *Swarm) DiskSupport(context.Context) error {
	return fmt.Errorf("%w: on a cluster (--engine swarm) a workspace's container is on another node", ErrDiskUnsupported)
}

// BindDisk: see DiskSupport.
func (s *Swarm) BindDisk(ctx context.Context, _, _ string) error { return s.DiskSupport(ctx) }

// Places is true: workspaces take placement constraints.
func (s *Swarm) Places() bool { return true }
