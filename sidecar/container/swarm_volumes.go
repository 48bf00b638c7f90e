package container

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/swarm"
)

// A workspace's volumes are on the node its task ran on, and the manager's
// API does not manage nodes' volumes. So the sidecar removes them there
// the way it checks the nodes' binaries: a one-shot task on each other
// node, from patina's agent image (the sidecar's own binary, named by its
// ID: only nodes that hold exactly it can run it), with that node's Docker
// socket (--swarm-node-socket) mounted, running `patina agent
// remove-volumes`, which removes only volumes of that name that carry the
// workspace's label. Nothing of a workspace reaches the task.

const (
	defaultNodeSocket = "/var/run/docker.sock"
	swarmRoleCleanup  = "volume-cleanup"
	// nodeCleanupTimeout bounds the wait for every node's task.
	nodeCleanupTimeout = time.Minute
)

// removeNodeVolumes removes the workspace's volumes on every node but this
// one (whose engine the sidecar reaches itself).
func (s *Swarm) removeNodeVolumes(ctx context.Context, workspaceID string) error {
	if err := validID(workspaceID); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, nodeCleanupTimeout)
	defer cancel()
	info, err := s.api.Info(ctx)
	if err != nil {
		return err
	}
	self := info.Swarm.NodeID
	nodes, err := s.api.NodeList(ctx, swarm.NodeListOptions{})
	if err != nil {
		return fmt.Errorf("list the swarm's nodes: %w", err)
	}
	want := map[string]bool{}
	for _, n := range nodes {
		if n.ID != self && n.Status.State == swarm.NodeStateReady {
			want[n.ID] = true
		}
	}
	if len(want) == 0 {
		return nil
	}
	im, err := s.agentImage()
	if err != nil {
		return err
	}
	imageID, err := ensureOwnImage(ctx, s.api, im)
	if err != nil {
		return fmt.Errorf("patina's agent image on the manager: %w", err)
	}
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	// Not labelled with the workspace: List would take it for its service.
	labels := map[string]string{LabelManaged: "1", LabelStateDir: s.cfg.StateDir, LabelRole: swarmRoleCleanup}
	resp, err := s.api.ServiceCreate(ctx, oneShot(oneShotSpec{
		Name: "patina-cleanup-" + hex.EncodeToString(suffix), Labels: labels, Image: imageID,
		Command:     []string{"/patina", "agent", "remove-volumes", "--workspace-id", workspaceID},
		Env:         []string{"DOCKER_HOST=unix:///var/run/docker.sock"},
		Mounts:      []mount.Mount{{Type: mount.TypeBind, Source: s.cfg.NodeSocket, Target: "/var/run/docker.sock"}},
		Constraints: []string{"node.id!=" + self},
	}), swarm.ServiceCreateOptions{})
	if err != nil {
		return fmt.Errorf("remove the workspace's volumes on the swarm's nodes: %w", err)
	}
	defer func() { _ = s.api.ServiceRemove(context.WithoutCancel(ctx), resp.ID) }()
	why := map[string]string{}
	for {
		ts, err := s.api.TaskList(ctx, swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("service", resp.ID))})
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("the tasks of the volume cleanup: %w", err)
		}
		for _, t := range ts {
			if !want[t.NodeID] {
				continue
			}
			switch t.Status.State {
			case swarm.TaskStateComplete:
				why[t.NodeID] = ""
			case swarm.TaskStateFailed, swarm.TaskStateRejected, swarm.TaskStateShutdown, swarm.TaskStateOrphaned:
				why[t.NodeID] = fmt.Sprintf("node %s: %s", short(t.NodeID), taskWhy(t))
			}
		}
		if len(why) == len(want) || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(swarmWaitPeriod):
		}
	}
	var errs []error
	for n := range want {
		w, done := why[n]
		switch {
		case !done:
			errs = append(errs, fmt.Errorf("node %s: the volume cleanup did not finish within %s", short(n), nodeCleanupTimeout))
		case w != "":
			errs = append(errs, errors.New(w))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("the workspace's volumes may be left on some nodes (docs/scale-out.md, Pruning): %w", errors.Join(errs...))
	}
	return nil
}

// oneShotSpec is a task patina runs once on each node a constraint allows:
// its own binary (/patina in its agent image, named by ID) as root, no
// capabilities, no new privileges, bounded memory and processes.
type oneShotSpec struct {
	Name, Image string
	Labels      map[string]string
	Command     []string
	Env         []string
	Mounts      []mount.Mount
	Constraints []string
}

// oneShot is the global service of one-shot tasks sp describes.
func oneShot(sp oneShotSpec) swarm.ServiceSpec {
	return swarm.ServiceSpec{
		Annotations: swarm.Annotations{Name: sp.Name, Labels: sp.Labels},
		TaskTemplate: swarm.TaskSpec{
			ContainerSpec: &swarm.ContainerSpec{
				Image: sp.Image, Labels: sp.Labels, Command: sp.Command, Args: []string{}, User: "0", Env: sp.Env, Mounts: sp.Mounts,
				Privileges:     &swarm.Privileges{NoNewPrivileges: true},
				CapabilityDrop: []string{"ALL"},
			},
			Resources:     &swarm.ResourceRequirements{Limits: &swarm.Limit{MemoryBytes: 128 << 20, Pids: 32}},
			RestartPolicy: &swarm.RestartPolicy{Condition: swarm.RestartPolicyConditionNone},
			Placement:     &swarm.Placement{Constraints: sp.Constraints},
		},
		Mode: swarm.ServiceMode{Global: &swarm.GlobalService{}},
	}
}
