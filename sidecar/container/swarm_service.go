package container

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/swarm"
)

// A workspace on a swarm is a service of one replica: its creation,
// placement (pinning to a node), start, stop and removal.

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
