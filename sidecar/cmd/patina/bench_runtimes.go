//go:build !windows

package main

import (
	"github.com/patina-dev/patina/sidecar/bench"
	"github.com/spf13/cobra"
)

// runRuntimes is `patina bench --runsc-host HOST`: runc against runsc.
func (o *benchOptions) runRuntimes(cmd *cobra.Command, a *app, bin string) error {
	if o.opts.Samples <= 0 || o.opts.CreateSamples <= 0 {
		return usagef("--samples and --create-samples must be positive")
	}
	samples, creates := o.opts.Samples, o.opts.CreateSamples
	if !cmd.Flags().Changed("samples") {
		samples = 0 // Runtimes' default
	}
	if !cmd.Flags().Changed("create-samples") {
		creates = 0
	}
	rep, err := bench.Runtimes(cmd.Context(), bench.RuntimeOptions{
		Binary: bin, Image: o.opts.Image, RunscHost: o.runscHost,
		Samples: samples, CreateSamples: creates, Progress: a.stderr,
	})
	if err != nil {
		return err
	}
	return o.print(a, rep)
}
