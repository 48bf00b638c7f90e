package main

import "github.com/spf13/cobra"

// On Windows patina is the CLI, the Go client and the MCP server of a
// sidecar that runs on Linux (in WSL 2, or on another host): serve says
// so, and there is no image, bench or agent command.

// sidecarCmds is serve, which says where a sidecar runs.
func sidecarCmds(*app) []*cobra.Command {
	return []*cobra.Command{{
		Use:   "serve",
		Short: "Run the sidecar (not on Windows: run it on Linux, in WSL 2 or on another host)",
		Long: `The sidecar runs on Linux (and macOS) only. On Windows, run patina serve in
WSL 2 or on a Linux host, and point this CLI at it with --addr (or PATINA_ADDR)
and --token (or PATINA_TOKEN).`,
		Args: cobra.ArbitraryArgs,
		RunE: func(*cobra.Command, []string) error { return errNoLocalSidecar },
	}}
}

// hostCmds: none run on Windows.
func hostCmds(*app) []*cobra.Command { return nil }
