//go:build !windows

package main

import (
	"context"
	"fmt"

	"github.com/docker/docker/client"
	"github.com/spf13/cobra"

	"github.com/patina-dev/patina/sidecar/container"
)

func newAgentRemoveVolumesCmd(a *app) *cobra.Command {
	var id string
	cmd := &cobra.Command{
		Use:   "remove-volumes --workspace-id ID",
		Short: "Remove a deleted workspace's volumes on this node (swarm nodes)",
		Long: `Remove the volumes of workspace ID on the Docker engine of DOCKER_HOST
(those named patina-ID-state and patina-ID-files that carry its label; any
other volume is left), waiting up to 30 s for its container to let go of
them. The sidecar runs it on each swarm node, from patina's agent image with
the node's Docker socket mounted, when a workspace is deleted: the manager's
API cannot remove a node's volumes.`,
		Example: `  DOCKER_HOST=unix:///var/run/docker.sock /patina agent remove-volumes --workspace-id 3f2a9c01b7e4d5a6`,
		Hidden:  true,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			api, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
			if err != nil {
				return err
			}
			defer api.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), removeVolumesWait)
			defer cancel()
			err = container.RemoveVolumesWhenFree(ctx, api, id)
			if err != nil {
				return fmt.Errorf("remove the volumes of workspace %s: %w", id, err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&id, "workspace-id", "", "the workspace whose volumes go")
	_ = cmd.MarkFlagRequired("workspace-id")
	return cmd
}
