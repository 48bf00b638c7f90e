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
	id, err := s.create(ctx, spec, img.ID)
	if err != nil {
		// Nothing of a workspace that did not start is left: its service,
		// secret and network, and its volumes on the nodes its tasks went to.
		cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if cerr := s.removeFailed(cleanup, spec.WorkspaceID, id); cerr != nil {
			s.log.Warn("remove what a workspace that did not start left", "workspace_id", spec.WorkspaceID, "err", cerr)
		}
		if len(unverified) > 0 && errors.Is(err, ErrNotPlaced) {
			// Perhaps the nodes its placement allows are those.
			err = fmt.Errorf("%w; %w: workspaces run only on nodes where patina checked it, and these are not: %s", err, ErrAgentBinary, whyNot(unverified))
		}
		return "", err
	}
	return id, nil
}

// create is Create's work once the image and the nodes are known: the
// service ("" if none was made) and why it did not run.
func (s *Swarm) create(ctx context.Context, spec Spec, imageID string) (string, error) {
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
				Image:    imageID,
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
					d := taskStopGrace
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
	t, err := s.waitRunning(ctx, resp.ID, true)
	if err != nil {
		return resp.ID, err
	}
	if err := s.pin(ctx, resp.ID, t.NodeID); err != nil {
		return resp.ID, err
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
// A task that cannot be placed (pending with a reason for unplaceable)
// ends the wait with ErrNotPlaced and the swarm's reason; with failFast (a
// new service: every task it has is this wait's), so does one that a node
// rejected or that failed before it ran, at once: Swarm would only try
// again, the same way, until the deadline.
func (s *Swarm) waitRunning(ctx context.Context, serviceID string, failFast bool) (swarm.Task, error) {
	ctx, cancel := context.WithTimeout(ctx, placeTimeout)
	defer cancel()
	var last string
	var pendingSince time.Time
	for {
		// Every task, not only those meant to run: a rejected one is shut
		// down at once and replaced by another that will fail alike.
		ts, err := s.api.TaskList(ctx, swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("service", serviceID))})
		if err != nil {
			return swarm.Task{}, fmt.Errorf("list the tasks of service %s: %w", short(serviceID), err)
		}
		for _, t := range ts {
			if !failFast && t.DesiredState != swarm.TaskStateRunning {
				continue
			}
			switch t.Status.State {
			case swarm.TaskStateRunning:
				if t.DesiredState == swarm.TaskStateRunning {
					return t, nil
				}
			case swarm.TaskStateRejected, swarm.TaskStateFailed:
				if failFast {
					return swarm.Task{}, fmt.Errorf("%w: %s", ErrNotPlaced, s.taskFailure(ctx, t))
				}
			case swarm.TaskStatePending:
				if t.Status.Err == "" {
					break
				}
				if pendingSince.IsZero() {
					pendingSince = time.Now()
				} else if time.Since(pendingSince) > unplaceable {
					return swarm.Task{}, fmt.Errorf("%w: no node can take it: %s", ErrNotPlaced, t.Status.Err)
				}
			}
			if t.DesiredState == swarm.TaskStateRunning {
				last = taskWhy(t)
			}
		}
		select {
		case <-ctx.Done():
			if last == "" {
				last = "no task was scheduled"
			}
			return swarm.Task{}, fmt.Errorf("%w: its task did not start in time: %s", ErrNotPlaced, last)
		case <-time.After(swarmWaitPeriod):
		}
	}
}

// taskFailure says, in the operator's terms, why a task was rejected or
// failed on its node.
func (s *Swarm) taskFailure(ctx context.Context, t swarm.Task) string {
	node := short(t.NodeID)
	if n, _, err := s.api.NodeInspectWithRaw(ctx, t.NodeID); err == nil {
		node = nodeName(n)
	}
	msg := taskWhy(t)
	lower := strings.ToLower(msg)
	switch {
	case strings.Contains(lower, "no such image"):
		return fmt.Sprintf("node %s does not have the workspace's image (%s): load it there (docker save IMAGE | docker load on that node), or place the workspace on a node that has it", node, msg)
	case strings.Contains(msg, "bind source path does not exist"):
		return fmt.Sprintf("node %s has no patina binary at %s (--node-binary): install the sidecar's binary there (%s)", node, s.cfg.NodeBinary, msg)
	case strings.Contains(lower, "function not implemented") || strings.Contains(lower, "adding rsa"):
		return fmt.Sprintf("node %s could not join the workspace's encrypted overlay network (%s): its kernel lacks IPsec ESP (modprobe esp4 on every node), or serve with --swarm-unencrypted", node, msg)
	}
	return fmt.Sprintf("node %s: %s", node, msg)
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
		if err == nil || attempt >= 3 || !outOfSequence(err) {
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
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for nudges := 0; ; nudges++ {
		wctx, wcancel := context.WithTimeout(ctx, startNudgeEvery)
		_, err := s.waitRunning(wctx, id, false)
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
	ctx, cancel := context.WithTimeout(ctx, timeout+stopSlack)
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
	return s.removeObjects(ctx, wsID, id)
}

// removeFailed removes what a workspace that did not start left: its
// service (serviceID, if one was made), secret and network, and its
// volumes on this node.
func (s *Swarm) removeFailed(ctx context.Context, workspaceID, serviceID string) error {
	var errs []error
	if serviceID != "" {
		if err := s.api.ServiceRemove(ctx, serviceID); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove service %s: %w", short(serviceID), err))
		}
	}
	errs = append(errs, s.removeObjects(ctx, workspaceID, serviceID))
	errs = append(errs, s.RemoveVolumes(ctx, workspaceID))
	return errors.Join(errs...)
}

// removeObjects removes a workspace's secrets and network once the tasks
// of its service (serviceID, if any) are gone.
func (s *Swarm) removeObjects(ctx context.Context, wsID, id string) error {
	// Its secret and network stay in use until its tasks are gone.
	gone, cancel := context.WithTimeout(ctx, objectsFreeWait)
	for gone.Err() == nil && id != "" {
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

// outOfSequence reports swarmkit's refusal of an update made from a
// version that another update has replaced meanwhile: try again from the
// current version. The engine passes it on as a plain error ("rpc error:
// … update out of sequence"), with no type or status of its own, so its
// text is the one way to tell; this is the one place that reads it.
func outOfSequence(err error) bool {
	return err != nil && strings.Contains(err.Error(), "out of sequence")
}

// RemoveVolumesWhenFree removes a workspace's volumes on api's engine,
// trying again while they are in use (the workspace's container goes a
// moment after its service), until ctx ends.
func RemoveVolumesWhenFree(ctx context.Context, api VolumeAPI, workspaceID string) error {
	return retryInUse(ctx, func() error { return RemoveVolumes(ctx, api, workspaceID) })
}

// RemoveVolumes removes the workspace's volumes on this node (its task's
// container may take a moment to go) and, by a one-shot task on each
// other node, there (removeNodeVolumes).
func (s *Swarm) RemoveVolumes(ctx context.Context, workspaceID string) error {
	local := retryInUse(ctx, func() error { return s.local.RemoveVolumes(ctx, workspaceID) })
	return errors.Join(local, s.removeNodeVolumes(ctx, workspaceID))
}
