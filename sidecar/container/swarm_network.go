package container

import (
	"context"
	"fmt"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/network"
)

// Each workspace on a swarm has an overlay network of its own.

// swarmNetwork is a workspace's overlay network.
func swarmNetwork(workspaceID string) string { return "patina-ws-" + workspaceID }

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
