//go:build !windows

package main

import (
	"fmt"

	"github.com/docker/docker/client"
	"github.com/spf13/cobra"

	"github.com/patina-dev/patina/sidecar/bench"
)

// runDensity is `patina bench --density N`: N idle workspaces at once.
func (o *benchOptions) runDensity(cmd *cobra.Command, a *app, bin string) error {
	if o.density <= 0 {
		return usagef("--density must be positive, got %d", o.density)
	}
	if o.engine != "docker" || o.runscHost != "" {
		return usagef("--density measures this host's engine: it takes neither --engine swarm nor --runsc-host")
	}
	api, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return fmt.Errorf("docker client: %w", err)
	}
	defer api.Close()
	rep, err := bench.Density(cmd.Context(), bench.DensityOptions{
		Binary: bin, Image: o.opts.Image, Workspaces: o.density, API: api, Progress: a.stderr,
	})
	if err != nil {
		return err
	}
	return o.print(a, rep)
}
