//go:build !windows

package main

import "github.com/spf13/cobra"

// sidecarCmds run or measure a sidecar on this host.
func sidecarCmds(a *app) []*cobra.Command {
	return []*cobra.Command{newServeCmd(a), newImageCmd(a), newBenchCmd(a)}
}

// hostCmds are the commands patina runs inside workspaces and on nodes
// (hidden).
func hostCmds(a *app) []*cobra.Command { return []*cobra.Command{newAgentCmd(a)} }
