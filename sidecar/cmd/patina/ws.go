package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/patina-dev/patina/sidecar/client"
	"github.com/spf13/cobra"
)

func newWsCmd(a *app) *cobra.Command {
	cmd := groupCmd(&cobra.Command{
		Use:     "ws",
		Aliases: []string{"workspace", "workspaces"},
		Short:   "Create, list and manage workspaces",
		Long: `A workspace is one Docker container holding persistent bash sessions, with its
files in /workspace. Made from a repository (--repo), /workspace is a git
repository of its own, on a branch patina/<name> started at the base commit;
that branch is also kept in your repository on the sidecar's machine: diff,
commit, merge and apply bring the work back into it. Made without --repo, it
is a scratch workspace: an empty directory and no git.

Commands that take a workspace (WS) accept its name or its id.`,
		Example: `  patina ws create --name fix-tests --repo .
  patina ws ls
  patina ws diff fix-tests --stat
  patina ws commit fix-tests -m "Fix the flaky test"
  patina ws merge fix-tests --into main
  patina ws port fix-tests 3000
  patina ws fork fix-tests --name fix-tests-b
  patina ws snapshot fix-tests --name fix-tests-ready
  patina ws rm fix-tests`,
	})
	cmd.AddCommand(
		newWsCreateCmd(a),
		newWsLsCmd(a),
		newWsShowCmd(a),
		newWsStopCmd(a),
		newWsStartCmd(a),
		newWsRmCmd(a),
		newWsCpCmd(a),
		newWsDiffCmd(a),
		newWsCommitCmd(a),
		newWsMergeCmd(a),
		newWsApplyCmd(a),
		newWsLogCmd(a),
		newWsPortCmd(a),
		newWsNetworkCmd(a),
		newWsForkCmd(a),
		newWsSnapshotCmd(a),
	)
	return cmd
}

// printWorkspace prints a workspace as "Key: value" lines.
func printWorkspace(w io.Writer, ws client.Workspace, now time.Time) error {
	type kv struct{ k, v string }
	status := ws.Status
	if ws.Error != "" {
		status += " (" + ws.Error + ")"
	}
	base := ws.Base
	if ws.BaseCommit != "" {
		base = strings.TrimSpace(base + " " + shortCommit(ws.BaseCommit))
	}
	created := ""
	if !ws.CreatedAt.IsZero() {
		created = ws.CreatedAt.Local().Format(time.RFC3339) + " (" + ago(now, ws.CreatedAt) + ")"
	}
	lines := []kv{
		{"Name", ws.Name},
		{"ID", ws.ID},
		{"Status", status},
		{"Repo", ws.Repo},
		{"Branch", ws.Branch},
		{"Base", base},
		{"Worktree", ws.Worktree},
		{"Image", ws.Image},
		{"Template", ws.Template},
		{"Container", shortID(ws.ContainerID)},
		{"Network", ws.Network.String()},
		{"Limits", limits(ws)},
		{"Idle stop", idleStopText(ws.IdleStop)},
		{"Env", envList(ws.Env, ws.SecretEnv)},
		{"Secrets", strings.Join(ws.Secrets, " ")},
		{"Created", created},
	}
	if ws.Repo == "" {
		lines[3].v = "(scratch workspace: no git)"
	}
	for _, l := range lines {
		if l.v == "" {
			continue
		}
		if _, err := fmt.Fprintf(w, "%-10s %s\n", l.k+":", l.v); err != nil {
			return err
		}
	}
	return nil
}

// idleStopText is a workspace's idle_stop as ws show prints it.
func idleStopText(d string) string {
	if d == "" {
		return ""
	}
	return "after " + d + " without activity"
}

func limits(ws client.Workspace) string {
	var parts []string
	if ws.MemoryMB > 0 {
		parts = append(parts, fmt.Sprintf("%d MB memory", ws.MemoryMB))
	}
	if ws.CPUs > 0 {
		parts = append(parts, fmt.Sprintf("%g CPUs", ws.CPUs))
	}
	if ws.PidsLimit > 0 {
		parts = append(parts, fmt.Sprintf("%d processes", ws.PidsLimit))
	}
	return strings.Join(parts, ", ")
}

// envList is the environment as K=V words; a secret variable shows its
// name only.
func envList(env map[string]string, secret []string) string {
	keys := make([]string, 0, len(env)+len(secret))
	for k := range env {
		keys = append(keys, k)
	}
	keys = append(keys, secret...)
	sort.Strings(keys)
	for i, k := range keys {
		if v, ok := env[k]; ok {
			keys[i] = cell(k + "=" + v)
		} else {
			keys[i] = k + "=(secret)"
		}
	}
	return strings.Join(keys, " ")
}

// shortID cuts a Docker id to the 12 characters docker ps shows.
func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// shortCommit cuts a commit hash to 10 characters.
func shortCommit(h string) string {
	if len(h) > 10 {
		return h[:10]
	}
	return h
}
