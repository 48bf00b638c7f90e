package container

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"
	"golang.org/x/sys/unix"
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

// ErrUnsupported: the engine cannot do this.
var ErrUnsupported = errors.New("not supported by this engine")

// ErrNodeDown: the node a workspace is pinned to (where its volumes are)
// is down, drained or paused; it can run again when the node is back.
var ErrNodeDown = errors.New("the workspace's node is unavailable")

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
	return nil
}

// Local is false: a workspace may land on another node, so no host
// directory can be mounted into it.
func (s *Swarm) Local() bool { return false }

// Transport is how the agent is reached.
func (s *Swarm) Transport() string { return "swarm" }

// swarmNetwork is a workspace's overlay network.
func swarmNetwork(workspaceID string) string { return "patina-ws-" + workspaceID }

// secretName is the name of a workspace's token secret: secrets cannot
// change, so a new token is a new secret.
func secretName(workspaceID, token string) string {
	h := sha256.Sum256([]byte(token))
	return "patina-" + workspaceID + "-token-" + hex.EncodeToString(h[:4])
}

func (s *Swarm) labels(workspaceID string) map[string]string {
	return map[string]string{LabelManaged: "1", LabelWorkspace: workspaceID, LabelStateDir: s.cfg.StateDir}
}

// Create creates the workspace's service and waits until its task runs,
// then pins the service to that task's node. It returns the service id.
func (s *Swarm) Create(ctx context.Context, spec Spec) (string, error) {
	if err := validSpec(spec); err != nil {
		return "", err
	}
	if spec.Files != "" || spec.Disk != "" || len(spec.Mounts) > 0 {
		return "", fmt.Errorf("%w: host directories cannot be mounted into a swarm workspace", ErrUnsupported)
	}
	if spec.Agent.Token == "" {
		return "", errors.New("swarm workspace: no agent token")
	}
	img, err := s.api.ImageInspect(ctx, spec.Image)
	if err != nil {
		return "", fmt.Errorf("image %s: %w", spec.Image, err)
	}
	unverified, err := s.verifyNodes(ctx, "")
	if err != nil {
		return "", err
	}
	if !s.anyVerified() {
		return "", errNoVerifiedNode(unverified)
	}
	netID, err := s.ensureNetwork(ctx, spec.WorkspaceID, spec.Network == "none")
	if err != nil {
		return "", err
	}
	secretID, err := s.ensureSecret(ctx, spec.WorkspaceID, spec.Agent.Token)
	if err != nil {
		return "", err
	}
	labels := s.labels(spec.WorkspaceID)
	svcLabels := maps.Clone(labels)
	svcLabels[LabelName] = spec.Name
	env := make([]string, 0, len(spec.Env)+1)
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		env = append(env, k+"="+spec.Env[k])
	}
	env = append(env, "PATINA_WORKSPACE="+spec.WorkspaceID)
	hostname := spec.Name
	if len(hostname) > 63 {
		hostname = hostname[:63]
	}
	volLabels := func(role string) *mount.VolumeOptions {
		l := maps.Clone(labels)
		l[LabelRole] = role
		return &mount.VolumeOptions{Labels: l, DriverConfig: &mount.Driver{Name: "local"}}
	}
	serve := []string{"agent", "serve", "--workspace-id", spec.WorkspaceID, "--takeover",
		"--tcp", fmt.Sprintf(":%d", swarmAgentPort), "--token-file", swarmTokenFile}
	serve = append(serve, spec.Agent.Args...)
	one := uint64(1)
	svc := swarm.ServiceSpec{
		Annotations: swarm.Annotations{Name: ContainerName(spec.WorkspaceID), Labels: svcLabels},
		TaskTemplate: swarm.TaskSpec{
			ContainerSpec: &swarm.ContainerSpec{
				Image:    img.ID,
				Labels:   svcLabels,
				Command:  append([]string{AgentPath, "agent", "pause", "--"}, serve...),
				Args:     []string{},
				Env:      env,
				Dir:      Workdir,
				Hostname: hostname,
				Mounts: []mount.Mount{
					{Type: mount.TypeBind, Source: s.cfg.NodeBinary, Target: AgentPath, ReadOnly: true},
					{Type: mount.TypeVolume, Source: VolumeName(spec.WorkspaceID, "state"), Target: StatePath, VolumeOptions: volLabels("state")},
					{Type: mount.TypeVolume, Source: VolumeName(spec.WorkspaceID, "files"), Target: Workdir, VolumeOptions: volLabels("files")},
				},
				Secrets: []*swarm.SecretReference{{
					SecretID: secretID, SecretName: secretName(spec.WorkspaceID, spec.Agent.Token),
					File: &swarm.SecretReferenceFileTarget{Name: swarmTokenName, UID: "0", GID: "0", Mode: 0o400},
				}},
				Privileges:     &swarm.Privileges{NoNewPrivileges: true},
				CapabilityDrop: []string{"ALL"},
				CapabilityAdd:  capNames(),
				StopGracePeriod: func() *time.Duration {
					d := 5 * time.Second
					return &d
				}(),
			},
			Resources: &swarm.ResourceRequirements{Limits: &swarm.Limit{
				NanoCPUs: int64(spec.CPUs * 1e9), MemoryBytes: spec.MemoryMB << 20, Pids: spec.PidsLimit,
			}},
			RestartPolicy: &swarm.RestartPolicy{Condition: swarm.RestartPolicyConditionAny},
			// Until it is pinned: only nodes whose binary this process
			// checked.
			Placement: &swarm.Placement{Constraints: append(slices.Clone(spec.Placement), s.agentConstraint())},
			Networks:  []swarm.NetworkAttachmentConfig{{Target: netID}},
		},
		Mode:         swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: &one}},
		EndpointSpec: &swarm.EndpointSpec{Mode: swarm.ResolutionModeDNSRR},
	}
	resp, err := s.api.ServiceCreate(ctx, svc, swarm.ServiceCreateOptions{})
	if err != nil {
		return "", fmt.Errorf("create the service of workspace %s: %w", spec.WorkspaceID, err)
	}
	t, err := s.waitRunning(ctx, resp.ID)
	if err != nil {
		_ = s.api.ServiceRemove(context.WithoutCancel(ctx), resp.ID)
		if len(unverified) > 0 {
			// Perhaps the nodes its placement allows are those.
			err = fmt.Errorf("%w; %w: workspaces run only on nodes where patina checked it, and these are not: %s", err, ErrAgentBinary, whyNot(unverified))
		}
		return "", err
	}
	if err := s.pin(ctx, resp.ID, t.NodeID); err != nil {
		_ = s.api.ServiceRemove(context.WithoutCancel(ctx), resp.ID)
		return "", err
	}
	s.log.Info("workspace placed", "workspace_id", spec.WorkspaceID, "service", short(resp.ID), "node", short(t.NodeID))
	return resp.ID, nil
}

// capNames are Capabilities as Swarm wants them.
func capNames() []string {
	out := make([]string, len(Capabilities))
	for i, c := range Capabilities {
		out[i] = "CAP_" + c
	}
	return out
}

// ensureNetwork makes the workspace's own overlay network: attachable (the
// relay container joins it), encrypted unless configured otherwise, and
// internal (no way out) for network "none".
func (s *Swarm) ensureNetwork(ctx context.Context, workspaceID string, internal bool) (string, error) {
	name := swarmNetwork(workspaceID)
	if n, err := s.api.NetworkInspect(ctx, name, network.InspectOptions{}); err == nil {
		if n.Labels[LabelWorkspace] != workspaceID {
			return "", fmt.Errorf("network %s exists and is not this workspace's", name)
		}
		return n.ID, nil
	} else if !errdefs.IsNotFound(err) {
		return "", fmt.Errorf("inspect network %s: %w", name, err)
	}
	opts := map[string]string{}
	if !s.cfg.Unencrypted {
		opts["encrypted"] = ""
	}
	resp, err := s.api.NetworkCreate(ctx, name, network.CreateOptions{
		Driver: "overlay", Attachable: true, Internal: internal, Options: opts, Labels: s.labels(workspaceID),
	})
	if err != nil {
		return "", fmt.Errorf("create network %s: %w", name, err)
	}
	return resp.ID, nil
}

// ensureSecret makes the secret holding the agent's token.
func (s *Swarm) ensureSecret(ctx context.Context, workspaceID, token string) (string, error) {
	name := secretName(workspaceID, token)
	list, err := s.api.SecretList(ctx, swarm.SecretListOptions{Filters: filters.NewArgs(filters.Arg("name", name))})
	if err != nil {
		return "", fmt.Errorf("list secrets: %w", err)
	}
	for _, sec := range list {
		if sec.Spec.Name == name && sec.Spec.Labels[LabelWorkspace] == workspaceID {
			return sec.ID, nil
		}
	}
	resp, err := s.api.SecretCreate(ctx, swarm.SecretSpec{
		Annotations: swarm.Annotations{Name: name, Labels: s.labels(workspaceID)},
		Data:        []byte(token),
	})
	if err != nil {
		return "", fmt.Errorf("create the agent's secret: %w", err)
	}
	return resp.ID, nil
}

// tasks lists a service's tasks that should run.
func (s *Swarm) tasks(ctx context.Context, serviceID string) ([]swarm.Task, error) {
	return s.api.TaskList(ctx, swarm.TaskListOptions{Filters: filters.NewArgs(
		filters.Arg("service", serviceID), filters.Arg("desired-state", "running"))})
}

// unplaceable is how long a task may stay pending with an error (no node
// meets its constraints, none has the resources) before waitRunning gives
// up on it.
const unplaceable = 3 * time.Second

// waitRunning waits until the service has a running task, and returns it.
// A task that cannot be placed or fails says why.
func (s *Swarm) waitRunning(ctx context.Context, serviceID string) (swarm.Task, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var last string
	var pendingSince time.Time
	for {
		ts, err := s.tasks(ctx, serviceID)
		if err != nil {
			return swarm.Task{}, fmt.Errorf("list the tasks of service %s: %w", short(serviceID), err)
		}
		for _, t := range ts {
			if t.Status.State == swarm.TaskStateRunning {
				return t, nil
			}
			last = taskWhy(t)
			if t.Status.State == swarm.TaskStatePending && t.Status.Err != "" {
				if pendingSince.IsZero() {
					pendingSince = time.Now()
				} else if time.Since(pendingSince) > unplaceable {
					return swarm.Task{}, fmt.Errorf("the workspace's task did not start: no node can take it: %s", t.Status.Err)
				}
			}
		}
		select {
		case <-ctx.Done():
			if last == "" {
				last = "no task was scheduled"
			}
			return swarm.Task{}, fmt.Errorf("the workspace's task did not start: %s (%w)", last, ctx.Err())
		case <-time.After(swarmWaitPeriod):
		}
	}
}

// taskWhy says what a task is doing, and why it is not running.
func taskWhy(t swarm.Task) string {
	msg := string(t.Status.State)
	if t.Status.Err != "" {
		msg += ": " + t.Status.Err
	} else if t.Status.Message != "" {
		msg += ": " + t.Status.Message
	}
	return msg
}

// pin adds node.id==node to the service's constraints, so that it always
// comes back where its volumes are. Swarm does not restart a task whose
// node still meets a service's changed constraints.
func (s *Swarm) pin(ctx context.Context, serviceID, node string) error {
	return s.update(ctx, serviceID, func(spec *swarm.ServiceSpec) {
		p := spec.TaskTemplate.Placement
		if p == nil {
			p = &swarm.Placement{}
			spec.TaskTemplate.Placement = p
		}
		// Pinned, it needs the label no more: a later process that takes
		// it off (and checks the node again before it starts a stopped
		// workspace there) must not make Swarm stop one that runs.
		agent := s.agentConstraint()
		p.Constraints = slices.DeleteFunc(p.Constraints, func(c string) bool { return strings.HasPrefix(c, "node.id==") || c == agent })
		p.Constraints = append(p.Constraints, "node.id=="+node)
	})
}

// update changes a service's spec (retrying when another update won).
func (s *Swarm) update(ctx context.Context, serviceID string, change func(*swarm.ServiceSpec)) error {
	for attempt := 0; ; attempt++ {
		svc, _, err := s.api.ServiceInspectWithRaw(ctx, serviceID, swarm.ServiceInspectOptions{})
		if errdefs.IsNotFound(err) {
			return fmt.Errorf("service %s: %w", short(serviceID), ErrNotFound)
		}
		if err != nil {
			return err
		}
		spec := svc.Spec
		change(&spec)
		_, err = s.api.ServiceUpdate(ctx, serviceID, svc.Version, spec, swarm.ServiceUpdateOptions{})
		if err == nil || attempt >= 3 || !strings.Contains(err.Error(), "update out of sequence") {
			if err != nil {
				return fmt.Errorf("update service %s: %w", short(serviceID), err)
			}
			return nil
		}
	}
}

// replicas sets the service's replica count.
func (s *Swarm) replicas(ctx context.Context, serviceID string, n uint64) error {
	return s.update(ctx, serviceID, func(spec *swarm.ServiceSpec) {
		spec.Mode.Replicated = &swarm.ReplicatedService{Replicas: &n}
	})
}

// Start scales the service to one task and waits until it runs (on its
// node: where its volumes are). A node that is down or drained cannot take
// it: Start says so (ErrNodeDown) at once. A task left pending since its
// node was away is nudged (a forced update) so that it is scheduled again.
func (s *Swarm) Start(ctx context.Context, id string) error {
	svc, _, err := s.api.ServiceInspectWithRaw(ctx, id, swarm.ServiceInspectOptions{})
	if errdefs.IsNotFound(err) {
		return fmt.Errorf("service %s: %w", short(id), ErrNotFound)
	}
	if err != nil {
		return err
	}
	if why := s.nodeProblem(ctx, svc); why != "" {
		return fmt.Errorf("%w: %s: its volumes are there; start it again when the node is back", ErrNodeDown, why)
	}
	// The node's binary, checked (once per process) before the task
	// starts there.
	unverified, err := s.verifyNodes(ctx, pinnedNode(svc))
	if err != nil {
		return err
	}
	if why, bad := unverified[pinnedNode(svc)]; bad || (pinnedNode(svc) == "" && !s.anyVerified()) {
		if why == "" {
			why = whyNot(unverified)
		}
		return fmt.Errorf("%w: %s; its volumes are on that node: start it again once its binary is the sidecar's", ErrAgentBinary, why)
	}
	if err := s.replicas(ctx, id, 1); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for nudges := 0; ; nudges++ {
		wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
		_, err := s.waitRunning(wctx, id)
		wcancel()
		if err == nil || ctx.Err() != nil || nudges >= 5 {
			return err
		}
		ts, _ := s.tasks(ctx, id)
		states := make([]string, 0, len(ts))
		for _, t := range ts {
			states = append(states, short(t.ID)+" on "+short(t.NodeID)+": "+taskWhy(t))
		}
		s.log.Info("the workspace's task is not running yet: nudging it", "service", short(id), "node_state", s.nodeProblem(ctx, svc), "tasks", states, "err", err)
		if err := s.update(ctx, id, func(spec *swarm.ServiceSpec) { spec.TaskTemplate.ForceUpdate++ }); err != nil {
			return err
		}
	}
}

// pinnedNode is the node id a service is pinned to ("" if none yet).
func pinnedNode(svc swarm.Service) string {
	if p := svc.Spec.TaskTemplate.Placement; p != nil {
		for _, c := range p.Constraints {
			if n, ok := strings.CutPrefix(c, "node.id=="); ok {
				return n
			}
		}
	}
	return ""
}

// nodeProblem says why the node a service is pinned to cannot run it
// ("" if it can, or if that cannot be told).
func (s *Swarm) nodeProblem(ctx context.Context, svc swarm.Service) string {
	id := pinnedNode(svc)
	if id == "" {
		return ""
	}
	n, _, err := s.api.NodeInspectWithRaw(ctx, id)
	if errdefs.IsNotFound(err) {
		return "its node " + short(id) + " has left the swarm"
	}
	if err != nil {
		return ""
	}
	name := n.Description.Hostname
	if name == "" {
		name = short(id)
	}
	switch {
	case n.Status.State != swarm.NodeStateReady:
		return fmt.Sprintf("its node %s is %s", name, n.Status.State)
	case n.Spec.Availability != swarm.NodeAvailabilityActive:
		return fmt.Sprintf("its node %s is %s", name, n.Spec.Availability)
	}
	return ""
}

// Stop scales the service to none and waits (up to timeout and a little)
// until its task is gone: the container stops, its volumes stay.
func (s *Swarm) Stop(ctx context.Context, id string, timeout time.Duration) error {
	if err := s.replicas(ctx, id, 0); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout+10*time.Second)
	defer cancel()
	for {
		ts, err := s.api.TaskList(ctx, swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("service", id))})
		if err != nil {
			return err
		}
		live := false
		for _, t := range ts {
			switch t.Status.State {
			case swarm.TaskStateRunning, swarm.TaskStateStarting, swarm.TaskStatePreparing, swarm.TaskStateAssigned, swarm.TaskStateAccepted, swarm.TaskStateReady:
				live = true
			}
		}
		if !live {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("service %s did not stop: %w", short(id), ctx.Err())
		case <-time.After(swarmWaitPeriod):
		}
	}
}

// Remove removes the service, its secrets and its network (the relay
// leaves it first). A missing service is not an error.
func (s *Swarm) Remove(ctx context.Context, id string) error {
	svc, _, err := s.api.ServiceInspectWithRaw(ctx, id, swarm.ServiceInspectOptions{})
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	wsID := svc.Spec.Labels[LabelWorkspace]
	if err := s.api.ServiceRemove(ctx, id); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("remove service %s: %w", short(id), err)
	}
	if wsID == "" {
		return nil
	}
	// Its secret and network stay in use until its tasks are gone.
	gone, cancel := context.WithTimeout(ctx, 30*time.Second)
	for gone.Err() == nil {
		ts, err := s.api.TaskList(gone, swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("service", id))})
		if err != nil || len(ts) == 0 {
			break
		}
		select {
		case <-gone.Done():
		case <-time.After(swarmWaitPeriod):
		}
	}
	cancel()
	var errs []error
	if list, err := s.api.SecretList(ctx, swarm.SecretListOptions{Filters: filters.NewArgs(filters.Arg("label", LabelWorkspace+"="+wsID))}); err == nil {
		for _, sec := range list {
			if err := retryInUse(ctx, func() error { return s.api.SecretRemove(ctx, sec.ID) }); err != nil {
				errs = append(errs, fmt.Errorf("remove secret %s: %w", sec.Spec.Name, err))
			}
		}
	}
	name := swarmNetwork(wsID)
	s.detachRelay(ctx, name)
	if err := retryInUse(ctx, func() error { return s.api.NetworkRemove(ctx, name) }); err != nil {
		errs = append(errs, fmt.Errorf("remove network %s: %w", name, err))
	}
	return errors.Join(errs...)
}

// retryInUse calls remove until it succeeds or finds nothing to remove,
// for up to 10 s: a secret, network or volume stays in use a moment after
// its task is gone.
func retryInUse(ctx context.Context, remove func() error) error {
	for i := 0; ; i++ {
		err := remove()
		if err == nil || errdefs.IsNotFound(err) {
			return nil
		}
		if i >= 50 {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(swarmWaitPeriod):
		}
	}
}

// RemoveVolumes removes the workspace's volumes on this node (its task's
// container may take a moment to go). It cannot reach a volume on another
// node: the manager's API does not manage nodes' volumes, so those stay
// (docs/scale-out.md says how to prune them there).
func (s *Swarm) RemoveVolumes(ctx context.Context, workspaceID string) error {
	return retryInUse(ctx, func() error { return s.local.RemoveVolumes(ctx, workspaceID) })
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

// Watch polls the services every two seconds (task changes are not events
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
		case <-time.After(2 * time.Second):
		}
	}
}

// StartAgent has nothing to start: the container's PID 1 keeps its agent
// running (see agent pause), and starts it again within 5 s of its death.
// It waits (up to a minute) until the agent takes connections again, as
// starting it does on a single engine. A task new on a node that came back
// may stay unreachable from the relay a while (the overlay's peers are
// learnt again): after 15 s the relay is attached to the network anew.
func (s *Swarm) StartAgent(ctx context.Context, id string, _ AgentStart) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	refresh := time.Now().Add(15 * time.Second)
	for {
		st, err := s.Inspect(ctx, id)
		if err != nil {
			return err
		}
		if !st.Running {
			return fmt.Errorf("service %s has no running task (%s)", short(id), st.Error)
		}
		dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
		c, err := s.DialAgent(dctx, id)
		dcancel()
		if err == nil {
			c.Close()
			return nil
		}
		if !refresh.IsZero() && time.Now().After(refresh) {
			refresh = time.Time{}
			s.log.Info("the agent is not reachable yet: attaching the relay to its network again", "service", short(id), "err", err)
			if svc, _, err := s.api.ServiceInspectWithRaw(ctx, id, swarm.ServiceInspectOptions{}); err == nil {
				s.detachRelay(ctx, swarmNetwork(svc.Spec.Labels[LabelWorkspace]))
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the agent of service %s did not come back: %w", short(id), err)
		case <-time.After(swarmWaitPeriod):
		}
	}
}

// DialAgent connects to the workspace's agent: to its task's address on
// the workspace's overlay network (from the manager's task list, never
// from the workspace), from the relay container's network namespace.
func (s *Swarm) DialAgent(ctx context.Context, id string) (net.Conn, error) {
	svc, _, err := s.api.ServiceInspectWithRaw(ctx, id, swarm.ServiceInspectOptions{})
	if errdefs.IsNotFound(err) {
		return nil, fmt.Errorf("service %s: %w", short(id), ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	name := swarmNetwork(svc.Spec.Labels[LabelWorkspace])
	ts, err := s.tasks(ctx, id)
	if err != nil {
		return nil, err
	}
	var addr netip.Addr
	for _, t := range ts {
		if t.Status.State != swarm.TaskStateRunning {
			continue
		}
		for _, na := range t.NetworksAttachments {
			if na.Network.Spec.Name != name || len(na.Addresses) == 0 {
				continue
			}
			if p, err := netip.ParsePrefix(na.Addresses[0]); err == nil {
				addr = p.Addr()
			}
		}
	}
	if !addr.IsValid() {
		return nil, fmt.Errorf("service %s has no running task on network %s", short(id), name)
	}
	relay, err := s.relay(ctx, name)
	if err != nil {
		return nil, err
	}
	ns, err := s.local.netns(ctx, relay)
	if err != nil {
		s.forgetRelay(relay)
		return nil, fmt.Errorf("the relay container: %w", err)
	}
	defer ns.Close()
	var sa unix.Sockaddr
	if addr.Is4() {
		sa = &unix.SockaddrInet4{Port: swarmAgentPort, Addr: addr.As4()}
	} else {
		sa = &unix.SockaddrInet6{Port: swarmAgentPort, Addr: addr.As16()}
	}
	c, err := dialInNetns(ctx, ns, sa)
	if err != nil && !s.cfg.Unencrypted {
		err = fmt.Errorf("%w (workspace networks are encrypted: where the nodes' kernels lack IPsec ESP (esp4), or ESP cannot pass between nodes, nothing gets through; run the sidecar with --swarm-unencrypted on a trusted node network)", err)
	}
	return c, err
}

// relayName is the relay container of this state directory.
func (s *Swarm) relayName() string {
	h := sha256.Sum256([]byte(s.cfg.StateDir))
	return "patina-relay-" + hex.EncodeToString(h[:6])
}

// relay returns the relay container, made and attached to network if need
// be. It runs `patina agent pause` and nothing else; no port of it is
// published, and a workspace that reaches it on its network finds nothing
// listening (nor any route on: it forwards nothing).
func (s *Swarm) relay(ctx context.Context, netName string) (string, error) {
	s.relayMu.Lock()
	defer s.relayMu.Unlock()
	if s.relayID == "" {
		id, nets, err := s.ensureRelay(ctx)
		if err != nil {
			return "", err
		}
		s.relayID = id
		s.attached = map[string]bool{}
		for _, n := range nets {
			s.attached[n] = true
		}
	}
	if !s.attached[netName] {
		err := s.api.NetworkConnect(ctx, netName, s.relayID, nil)
		// A relay found running (a restarted sidecar) may be on it already.
		if err != nil && !strings.Contains(err.Error(), "already attached") && !strings.Contains(err.Error(), "already exists") {
			return "", fmt.Errorf("attach the relay to %s: %w", netName, err)
		}
		s.attached[netName] = true
	}
	return s.relayID, nil
}

// detachRelay takes the relay off a workspace's network; the next dial
// attaches it again.
func (s *Swarm) detachRelay(ctx context.Context, name string) {
	s.relayMu.Lock()
	relay := s.relayID
	delete(s.attached, name)
	s.relayMu.Unlock()
	if relay != "" {
		_ = s.api.NetworkDisconnect(ctx, name, relay, true)
	}
}

func (s *Swarm) forgetRelay(id string) {
	s.relayMu.Lock()
	if s.relayID == id {
		s.relayID = ""
	}
	s.relayMu.Unlock()
}

// ensureRelay finds or makes the running relay container and returns its
// id and the networks it is on. It is made from patina's own fill image
// (an empty directory: the binary is static, and comes from the verified
// agent volume), never from a workspace's image: it joins every
// workspace's network. A relay made from another image (by an older
// patina) is replaced.
func (s *Swarm) ensureRelay(ctx context.Context) (string, []string, error) {
	name := s.relayName()
	img, err := s.local.fillImage(ctx)
	if err != nil {
		return "", nil, fmt.Errorf("the relay container: %w", err)
	}
	vol, err := s.local.agent.ensure(ctx, s.local)
	if err != nil {
		return "", nil, err
	}
	if info, err := s.api.ContainerInspect(ctx, name); err == nil {
		if info.Config != nil && info.Config.Labels[LabelRole] == swarmRoleRelay && info.State != nil && info.State.Running && info.Image == img {
			var nets []string
			if info.NetworkSettings != nil {
				nets = slices.Collect(maps.Keys(info.NetworkSettings.Networks))
			}
			return info.ID, nets, nil
		}
		_ = s.api.ContainerRemove(ctx, info.ID, container.RemoveOptions{Force: true})
	}
	netID, err := s.local.ensureNetwork(ctx)
	if err != nil {
		return "", nil, err
	}
	labels := map[string]string{LabelManaged: "1", LabelStateDir: s.cfg.StateDir, LabelRole: swarmRoleRelay}
	resp, err := s.api.ContainerCreate(ctx, &container.Config{
		Image: img, Entrypoint: []string{AgentPath, "agent", "pause"}, Cmd: []string{}, Labels: labels,
	}, &container.HostConfig{
		Mounts:        []mount.Mount{agentMount(vol, AgentDir, true)},
		NetworkMode:   container.NetworkMode(netID),
		SecurityOpt:   []string{"no-new-privileges"},
		CapDrop:       []string{"ALL"},
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyUnlessStopped},
		// It joins every workspace's network: it must never route
		// between them.
		Sysctls: map[string]string{"net.ipv4.ip_forward": "0", "net.ipv6.conf.all.forwarding": "0"},
	}, nil, nil, name)
	if err != nil {
		return "", nil, fmt.Errorf("create the relay container: %w", err)
	}
	if err := s.api.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		return "", nil, fmt.Errorf("start the relay container: %w", err)
	}
	return resp.ID, nil, nil
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
