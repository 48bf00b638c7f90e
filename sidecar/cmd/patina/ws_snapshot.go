package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/patina-dev/patina/sidecar/client"
)

func newWsSnapshotCmd(a *app) *cobra.Command {
	var (
		name   string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "snapshot WORKSPACE --name TEMPLATE",
		Short: "Save a running workspace as a template to create others from",
		Long: `Save a running workspace as the template TEMPLATE, as it is now:

  - its container's filesystem outside /workspace (packages installed with
    apt, files under /root, /etc, /usr/local...);
  - its files (/workspace), a git repository made in it included;
  - each session with its history and its last state: cwd, exported
    variables, functions, aliases, shell options.

A workspace created with "patina ws create --template TEMPLATE" starts with all
of it, each session in a new shell restored from its state; processes running
in WORKSPACE are not carried. WORKSPACE is paused while it is copied and is not
changed. Such a workspace takes no --repo (the template brings its files and
repository).

Refused: a workspace made from a repository (--repo: its history borrows the
repository's objects, which a template does not carry yet; fork it instead), a
workspace holding secrets or secret environment variables (its
sessions' state may hold their values, and a template is readable by whoever
uses this sidecar), a name a template has already (remove it first with
"patina template rm"), a workspace whose files and sessions' state exceed the
sidecar's bound (10 GiB), and a sidecar on --engine swarm.`,
		Example: `  patina ws snapshot fix-tests --name fix-tests-ready
  patina ws create --template fix-tests-ready try-2`,
		Args: wsArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if name == "" {
				return usagef("--name is required (the template's name)")
			}
			return a.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				done := a.progress("saving " + args[0])
				t, err := c.SnapshotWorkspace(ctx, args[0], client.SnapshotWorkspaceRequest{Name: name})
				done()
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(a.stdout, t)
				}
				_, err = fmt.Fprintf(a.stdout, "template %s (workspace %s, %s): %s\n", t.Name, args[0], humanBytes(t.SizeBytes), t.Image)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "the template's `NAME` (1 to 63 of a-z, 0-9, _ . -)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the template as JSON")
	return cmd
}
