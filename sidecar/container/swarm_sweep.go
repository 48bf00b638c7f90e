package container

import (
	"context"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"
)

// sweepLeftovers removes, at start (the state directory locked, before
// any create), the secrets and overlay networks of this state directory's
// workspaces that have no service (a create cut short when its sidecar
// died), then, in the background, their volumes on every node. What
// cannot be removed is logged and left.
func (s *Swarm) sweepLeftovers(ctx context.Context) {
	f := filters.NewArgs(filters.Arg("label", LabelStateDir+"="+s.cfg.StateDir))
	svcs, err := s.api.ServiceList(ctx, swarm.ServiceListOptions{Filters: f})
	if err != nil {
		return
	}
	live := map[string]bool{}
	for _, svc := range svcs {
		live[svc.Spec.Labels[LabelWorkspace]] = true
	}
	gone := map[string]bool{}
	if secs, err := s.api.SecretList(ctx, swarm.SecretListOptions{Filters: f}); err == nil {
		for _, sec := range secs {
			if ws := sec.Spec.Labels[LabelWorkspace]; ws != "" && !live[ws] {
				gone[ws] = true
			}
		}
	}
	if nets, err := s.api.NetworkList(ctx, network.ListOptions{Filters: f}); err == nil {
		for _, n := range nets {
			if ws := n.Labels[LabelWorkspace]; ws != "" && !live[ws] {
				gone[ws] = true
			}
		}
	}
	for ws := range gone {
		err := s.removeObjects(ctx, ws, "")
		s.log.Info("removed the secret and network a workspace that never started left", "workspace_id", ws, "err", err)
	}
	if len(gone) == 0 {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), sweepVolumesTimeout)
		defer cancel()
		for ws := range gone {
			if err := s.RemoveVolumes(ctx, ws); err != nil {
				s.log.Warn("remove the volumes a workspace that never started left", "workspace_id", ws, "err", err)
			}
		}
	}()
}
