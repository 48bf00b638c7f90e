package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/patina-dev/patina/sidecar/client"
)

func newTemplateCmd(a *app) *cobra.Command {
	cmd := groupCmd(&cobra.Command{
		Use:     "template",
		Aliases: []string{"templates"},
		Short:   "Build, list and remove workspace templates (a project's environment)",
		Long: `A template is an image holding a project's environment, made from its repository:
.devcontainer/devcontainer.json (or .devcontainer.json), or a Dockerfile named with
--dockerfile. patina builds it through the engine's own builder (offline: its FROM
images must be on the engine, e.g. patina/base:bookworm), runs its create commands
once (onCreateCommand, updateContentCommand, postCreateCommand), and keeps the
result as patina-template:<name>, named by a hash of the content that made it.

"ws create --repo R" does this by itself for a repository with a devcontainer.json:
the first workspace of a repository state builds the template, the next ones start
from it with no build. README "Templates" lists what of devcontainer.json is
supported.`,
		Example: `  patina template build --repo .
  patina template build --repo . --dockerfile tools/Dockerfile --name tools
  patina template ls
  patina ws create --template tools
  patina template rm tools`,
	})
	cmd.AddCommand(newTemplateBuildCmd(a), newTemplateLsCmd(a), newTemplateRmCmd(a))
	return cmd
}

func newTemplateBuildCmd(a *app) *cobra.Command {
	var (
		req     client.BuildTemplateRequest
		asJSON  bool
		quiet   bool
		verbose bool
	)
	cmd := &cobra.Command{
		Use:   "build --repo PATH",
		Short: "Build a repository's template (or find the one its content made), showing its progress",
		Long: `Build the template of a repository's devcontainer.json (or of a Dockerfile in it)
through the engine's build API, or find the one its content made already. On a
terminal its progress is one line, the build's latest output, rewritten in place;
off one nothing is shown. A failed build prints its last lines. --verbose shows
the whole output, -q nothing.`,
		Example: `  patina template build --repo .
  patina template build --repo ~/src/app --base v1.2
  patina template build --repo . --dockerfile Dockerfile --name app`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if req.Repo == "" {
				return usagef("--repo is required (the repository whose devcontainer.json or Dockerfile makes the template)")
			}
			abs, err := filepath.Abs(req.Repo)
			if err != nil {
				return fmt.Errorf("--repo %s: %w", req.Repo, err)
			}
			req.Repo = abs
			var progress io.Writer = a.stderr
			var tail *buildTail
			switch {
			case quiet:
				progress = io.Discard
			case !verbose:
				f, ok := a.stderr.(*os.File)
				tail = newBuildTail(a.stderr, ok && isTerminal(f), "building the template")
				progress = tail
			}
			return a.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				t, err := c.BuildTemplateProgress(ctx, req, progress)
				if tail != nil {
					tail.Close()
					if err != nil {
						// The cause of a failed build is in its last lines.
						for _, l := range tail.Tail() {
							fmt.Fprintln(a.stderr, "  "+l)
						}
					}
				}
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(a.stdout, t)
				}
				how := "built"
				if !t.Built {
					how = "unchanged, not rebuilt"
				}
				_, err = fmt.Fprintf(a.stdout, "template %s (%s): %s\n", t.Name, how, t.Image)
				return err
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Repo, "repo", "", "a path inside a git repository on the sidecar's machine")
	f.StringVar(&req.Base, "base", "", "the commit or ref whose files are used (default: HEAD)")
	f.StringVar(&req.Dockerfile, "dockerfile", "", "a Dockerfile's `PATH` in the repository, built with its directory as context (default: the devcontainer.json)")
	f.StringVar(&req.Name, "name", "", "name the template (default: dc- and 12 hex digits of its content's hash)")
	f.BoolVar(&asJSON, "json", false, "print the template as JSON")
	f.BoolVarP(&quiet, "quiet", "q", false, "show nothing of the build")
	f.BoolVar(&verbose, "verbose", false, "show the build's whole output, not a progress line")
	return cmd
}

func newTemplateLsCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the templates",
		Example: `  patina template ls
  patina template ls --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return query(a, cmd, asJSON, func(ctx context.Context, c *client.Client) ([]client.Template, error) {
				return c.ListTemplates(ctx)
			}, func(w io.Writer, ts []client.Template) error {
				rows := make([][]string, 0, len(ts))
				for _, t := range ts {
					rows = append(rows, []string{t.Name, t.Source, t.Repo, fmt.Sprintf("%d MB", t.SizeBytes>>20), ago(a.now(), t.CreatedAt), strings.Join(t.Ignored, ",")})
				}
				return writeTable(w, []string{"NAME", "FROM", "REPO", "SIZE", "BUILT", "IGNORED"}, rows)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the list as JSON")
	return cmd
}

func newTemplateRmCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "rm NAME...",
		Aliases: []string{"delete"},
		Short:   "Remove templates (refused while a workspace uses one)",
		Example: `  patina template rm dc-0123456789ab`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				for _, name := range args {
					if err := c.DeleteTemplate(ctx, name); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
}
