package main

import (
	"context"
	"fmt"
	"os/exec"

	"github.com/patina-dev/patina/sidecar/client"
	"github.com/spf13/cobra"
)

func newUICmd(a *app) *cobra.Command {
	var open bool
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Print (or open) the web console's address with a one-time sign-in code",
		Long: `Print the address of the sidecar's web console with a one-time code that signs
one browser in (within two minutes; the code is in the URL's fragment, which
browsers never send, so no log holds it). The console shows every workspace
live, its sessions and commands, its diff to review and merge, a terminal in
its sessions and its forwarded ports (see README "Console").

The sidecar must be reachable (see "patina serve"); the address is the one
the CLI uses. --open starts the desktop's browser (xdg-open) instead.`,
		Example: `  patina ui
  patina ui --open`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				code, err := c.ConsoleCode(ctx)
				if err != nil {
					return err
				}
				u := c.Addr() + code.Path
				if open {
					if err := exec.CommandContext(ctx, "xdg-open", u).Start(); err != nil {
						return fmt.Errorf("open a browser (xdg-open): %w; open this address yourself: %s", err, u)
					}
					return nil
				}
				_, err = fmt.Fprintln(a.stdout, u)
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&open, "open", false, "open the console in the desktop's browser (xdg-open)")
	return cmd
}
