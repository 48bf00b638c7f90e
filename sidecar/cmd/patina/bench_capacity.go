//go:build !windows

package main

import (
	"fmt"

	"github.com/docker/docker/client"
	"github.com/spf13/cobra"

	"github.com/patina-dev/patina/sidecar/bench"
	"github.com/patina-dev/patina/sidecar/workspace"
)

// runDensity is `patina bench --density N`: N idle workspaces at once.
func (o *benchOptions) runDensity(cmd *cobra.Command, a *app, bin string) error {
	if o.density <= 0 {
		return usagef("--density must be positive, got %d", o.density)
	}
	if o.engine != "docker" || o.runscHost != "" || cmd.Flags().Changed("burst") {
		return usagef("--density measures this host's engine alone: it takes neither --engine swarm, --runsc-host nor --burst")
	}
	api, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return fmt.Errorf("docker client: %w", err)
	}
	defer api.Close()
	rep, err := bench.Density(cmd.Context(), bench.HostOptions{
		Binary: bin, AgentBinary: o.agentBinary, Image: o.opts.Image, Workspaces: o.density, API: api, Progress: a.stderr,
	})
	if err != nil {
		return err
	}
	return o.print(a, rep)
}

// runBurst is `patina bench --burst N`: N creates at once.
func (o *benchOptions) runBurst(cmd *cobra.Command, a *app, bin string) error {
	if o.burst <= 0 || o.burst > workspace.MaxWarmPool {
		return usagef("--burst must be from 1 to %d (the warm pool's bound), got %d", workspace.MaxWarmPool, o.burst)
	}
	if o.engine != "docker" || o.runscHost != "" || cmd.Flags().Changed("density") {
		return usagef("--burst measures this host's engine alone: it takes neither --engine swarm, --runsc-host nor --density")
	}
	api, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return fmt.Errorf("docker client: %w", err)
	}
	defer api.Close()
	rep, err := bench.Burst(cmd.Context(), bench.HostOptions{
		Binary: bin, AgentBinary: o.agentBinary, Image: o.opts.Image, Workspaces: o.burst, API: api, Progress: a.stderr,
	})
	if err != nil {
		return err
	}
	return o.print(a, rep)
}
