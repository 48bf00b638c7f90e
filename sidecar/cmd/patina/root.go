package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// newRootCmd builds the command tree. Commands are added here; each is
// built by a newXCmd function in its own file.
func newRootCmd(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "patina",
		Short: "Isolated, persistent workspaces for AI coding agents and CI",
		Long: `patina keeps workspaces for AI coding agents and CI. A workspace is one long-lived
Docker container holding any number of persistent bash sessions (cd, export,
functions and aliases persist between commands), with its files in /workspace.
Made from a repository, /workspace is a git repository of its own on a branch
patina/<name>, which the sidecar records in your repository: its changes can be
diffed, committed and merged back.

"patina serve" runs the sidecar, an HTTP API on the loopback interface. The
other commands talk to it, with the token the sidecar keeps in its state
directory: run them as the same user, with the same --state-dir.

Settings (flag, else environment, else default):
  --state-dir  PATINA_STATE_DIR  $XDG_STATE_HOME/patina, else ~/.local/state/patina
  --addr       PATINA_ADDR       the address in <state-dir>/sidecar.json, else 127.0.0.1:7070
  --token      PATINA_TOKEN      the contents of <state-dir>/token

Exit status: 0 on success; 1 when patina fails (the message starts with
"patina: "); 2 for a bad command line; 130 when interrupted. "patina exec"
exits with its command's status, 124 when its --timeout ran out.

Shell completion (workspace and session names included): see
"patina completion --help".`,
		Example: `  patina serve &                                # start the sidecar
  patina image build                            # once: build the default image
  patina ws create --name demo --repo .         # a workspace on a branch of this repo
  patina exec demo -- 'make test'               # run a command in it
  patina ws diff demo                           # what it changed
  patina ws commit demo -m "Fix the tests"      # commit on its branch patina/demo
  patina ws merge demo                          # merge into the branch it came from
  patina ws rm demo`,
		Version:       version,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetVersionTemplate("patina {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{msg: err.Error()} })

	pf := root.PersistentFlags()
	pf.StringVar(&a.stateDir, "state-dir", "", "the sidecar's state directory (env "+envStateDir+"; default $XDG_STATE_HOME/patina, else ~/.local/state/patina)")
	pf.StringVar(&a.addr, "addr", "", "the sidecar's address, host:port (env "+envAddr+"; default: from <state-dir>/"+discoveryFile+", else "+defaultAddr+")")
	pf.StringVar(&a.token, "token", "", "the API token (env "+envToken+"; default: the contents of <state-dir>/"+tokenFile+")")

	root.AddGroup(
		&cobra.Group{ID: "sidecar", Title: "Sidecar:"},
		&cobra.Group{ID: "work", Title: "Workspaces and commands:"},
	)
	for _, c := range append(sidecarCmds(a), newUICmd(a)) {
		c.GroupID = "sidecar"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{newWsCmd(a), newExecCmd(a), newAttachCmd(a), newSessionsCmd(a), newHistoryCmd(a), newSecretCmd(a), newTemplateCmd(a)} {
		c.GroupID = "work"
		root.AddCommand(c)
	}
	root.AddCommand(newMCPCmd(a))
	root.AddCommand(hostCmds(a)...)
	root.AddCommand(newVersionCmd(a))
	a.markRunning(root)
	a.addCompletions(root)
	return root
}

func newVersionCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print patina's version",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(a.stdout, "patina", version)
			return err
		},
	}
}

// noArgs refuses positional arguments.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("%s takes no arguments (got %q)", cmd.CommandPath(), args)
	}
	return nil
}

// wsArg expects exactly one argument: a workspace's name or id.
func wsArg(cmd *cobra.Command, args []string) error {
	switch len(args) {
	case 1:
		if args[0] == "" {
			return usagef("%s: the workspace name is empty", cmd.CommandPath())
		}
		return nil
	case 0:
		return usagef("%s needs a workspace (its name or id)", cmd.CommandPath())
	default:
		return usagef("%s takes one workspace, got %d arguments: %q", cmd.CommandPath(), len(args), args)
	}
}

// groupCmd makes a command that only holds subcommands: alone it prints
// its help; with an unknown subcommand it is a usage error (cobra would
// print the help and succeed).
func groupCmd(cmd *cobra.Command) *cobra.Command {
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		cmd.SuggestionsMinimumDistance = 2
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "; did you mean " + strings.Join(s, " or ") + "?"
		}
		return usagef("%s", msg)
	}
	return cmd
}
