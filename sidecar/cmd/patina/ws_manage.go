package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/patina-dev/patina/sidecar/client"
	"github.com/spf13/cobra"
)

func newWsLsCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List workspaces",
		Example: `  patina ws ls
  patina ws ls --json | jq -r '.[].name'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return query(a, cmd, asJSON, func(ctx context.Context, c *client.Client) ([]client.Workspace, error) {
				return c.ListWorkspaces(ctx)
			},
				func(w io.Writer, wss []client.Workspace) error { return writeWorkspaces(w, wss, a.now()) })
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the workspaces as a JSON array")
	return cmd
}

// writeWorkspaces prints workspaces as a table, oldest first.
func writeWorkspaces(w io.Writer, wss []client.Workspace, now time.Time) error {
	wss = append([]client.Workspace(nil), wss...)
	sort.SliceStable(wss, func(i, j int) bool { return wss[i].CreatedAt.Before(wss[j].CreatedAt) })
	rows := make([][]string, 0, len(wss))
	for _, ws := range wss {
		status := ws.Status
		switch {
		case ws.IdlePaused:
			status += " (idle, paused)"
		case ws.IdleStopped:
			status += " (idle)"
		case ws.Error != "":
			status += " (error)"
		}
		rows = append(rows, []string{ws.Name, ws.ID, status, ws.Image, ws.Branch, ago(now, ws.CreatedAt)})
	}
	return writeTable(w, []string{"NAME", "ID", "STATUS", "IMAGE", "BRANCH", "CREATED"}, rows)
}

func newWsShowCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "show WS",
		Aliases: []string{"inspect"},
		Short:   "Show a workspace",
		Example: `  patina ws show fix-tests
  patina ws show fix-tests --json | jq -r .worktree`,
		Args: wsArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			return query(a, cmd, asJSON, func(ctx context.Context, c *client.Client) (client.Workspace, error) {
				return c.GetWorkspace(ctx, args[0])
			}, func(w io.Writer, ws client.Workspace) error { return printWorkspace(w, ws, a.now()) })
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the workspace as JSON")
	return cmd
}

func newWsStopCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "stop WS",
		Short: "Stop a workspace's container (its files, branch and sessions' history stay)",
		Long: `Stop a workspace's container. Its files, branch and sessions' history stay;
processes in it, the sessions' shells included, end. "patina ws start" starts it
again.`,
		Example: `  patina ws stop fix-tests`,
		Args:    wsArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.wsAction(cmd, args[0], "stopped", (*client.Client).StopWorkspace)
		},
	}
}

func newWsStartCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "start WS",
		Short:   "Start a stopped workspace's container (or recreate it if it is gone)",
		Example: `  patina ws start fix-tests`,
		Args:    wsArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.wsAction(cmd, args[0], "started", (*client.Client).StartWorkspace)
		},
	}
}

// wsAction runs a call that answers with the workspace, and says what it did.
func (a *app) wsAction(cmd *cobra.Command, name, done string,
	call func(*client.Client, context.Context, string) (client.Workspace, error)) error {
	return a.withClient(cmd, func(ctx context.Context, c *client.Client) error {
		ws, err := call(c, ctx, name)
		if err != nil {
			return err
		}
		// "stopped workspace w1", and the state only when it is not the
		// one the verb says (a start that ended in an error, say).
		line := fmt.Sprintf("%s workspace %s", done, ws.Name)
		if want := map[string]string{"stopped": "stopped", "started": "running"}[done]; ws.Status != want {
			line += fmt.Sprintf(" (it is %s)", ws.Status)
			if ws.Error != "" {
				line += ": " + ws.Error
			}
		}
		_, err = fmt.Fprintln(a.stdout, line)
		return err
	})
}

func newWsRmCmd(a *app) *cobra.Command {
	var keepBranch bool
	cmd := &cobra.Command{
		Use:     "rm WS...",
		Aliases: []string{"remove", "delete"},
		Short:   "Remove workspaces: container, sessions, files and branch",
		Long: `Remove workspaces: their containers, sessions and files, and (unless
--keep-branch) their branches patina/<name> and notes. Uncommitted changes are
lost; commit or merge first to keep them.`,
		Example: `  patina ws rm fix-tests
  patina ws rm --keep-branch fix-tests other`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("%s needs a workspace (its name or id)", cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			var failed error
			for _, name := range args {
				ctx, cancel := a.apiContext(cmd.Context())
				err := noAnswer(ctx, a.apiTimeout, c.DeleteWorkspace(ctx, name, client.DeleteOptions{KeepBranch: keepBranch}))
				cancel()
				if err != nil {
					if len(args) == 1 {
						return err
					}
					fmt.Fprintf(a.stderr, "patina: rm %s: %s\n", name, a.explain(err))
					failed = &exitError{code: exitFailure}
					continue
				}
				fmt.Fprintf(a.stdout, "removed workspace %s\n", name)
			}
			return failed
		},
	}
	cmd.Flags().BoolVar(&keepBranch, "keep-branch", false, "keep the git branch patina/<name> and its notes")
	return cmd
}
