package main

import (
	"context"
	"fmt"

	"github.com/patina-dev/patina/sidecar/client"
	"github.com/spf13/cobra"
)

func newWsForkCmd(a *app) *cobra.Command {
	var (
		name        string
		asJSON      bool
		keepSecrets bool
		count       int
	)
	cmd := &cobra.Command{
		Use:   "fork SRC [--name DST] [--count N]",
		Short: "Make a new workspace from another, as it is now",
		Long: `Make workspace DST from workspace SRC, as SRC is now:

  - its container's filesystem outside /workspace (a docker commit: packages
    installed with apt, files under /root, /etc, /usr/local...);
  - its files, uncommitted changes and untracked files included;
  - its own git repository, and for a workspace made from a repository a new
    branch patina/DST at SRC's current commit (recorded on patina/SRC first);
  - each session with its history and, in a new shell, its last state: cwd,
    exported variables, functions, aliases, shell options.

Processes running in SRC (servers, background jobs, a command in flight) are
not carried: DST's sessions start new shells. SRC keeps running and is not
changed (its container is paused for the moment it is committed). A stopped SRC
is forked as it was when it stopped. DST gets SRC's image settings, limits,
environment (its secret environment too: SRC's sessions hold it), network and
idle-stop, but none of the secrets SRC holds unless --keep-secrets; deleting it
also removes the image committed for it.

--count N makes N forks at once (at most 16), named DST-1 ... DST-N: SRC's state
is taken once and each fork gets its own copy-on-write clone of it. All are made
or none (if one fails, those made before it are deleted).`,
		Example: `  patina ws fork fix-tests --name fix-tests-b
  patina ws fork fix-tests --name try-2 --json
  patina ws fork fix-tests --name try-3 --keep-secrets
  patina ws fork fix-tests --name attempt --count 4`,
		Args: wsArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				if count < 0 || count > client.MaxForkCount {
					return usagef("--count must be between 1 and %d, not %d", client.MaxForkCount, count)
				}
				done := a.progress("forking " + args[0])
				wss, err := c.ForkWorkspaces(ctx, args[0], client.ForkWorkspaceRequest{Name: name, KeepSecrets: keepSecrets, Count: count})
				done()
				if err != nil {
					return err
				}
				if asJSON {
					if count <= 1 {
						return writeJSON(a.stdout, wss[0])
					}
					return writeJSON(a.stdout, wss)
				}
				for i, ws := range wss {
					if i > 0 {
						fmt.Fprintln(a.stdout)
					}
					if err := printWorkspace(a.stdout, ws, a.now()); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "the new workspace's name, also its branch patina/<name> (default: generated)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the new workspace as JSON")
	cmd.Flags().BoolVar(&keepSecrets, "keep-secrets", false, "give DST the secrets SRC holds (without it, DST holds none)")
	cmd.Flags().IntVar(&count, "count", 1, "make `N` forks at once, named DST-1 ... DST-N (all or none; --json prints an array)")
	return cmd
}
