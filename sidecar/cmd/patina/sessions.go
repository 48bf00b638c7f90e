package main

import (
	"context"
	"io"
	"strconv"
	"time"

	"github.com/patina-dev/patina/sidecar/client"
	"github.com/spf13/cobra"
)

func newSessionsCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "sessions WS",
		Short: "List a workspace's sessions",
		Long: `List a workspace's bash sessions: their status (idle, running, ended, closed),
current directory, how many commands they ran and the id of the one running.`,
		Example: `  patina sessions demo
  patina sessions demo --json`,
		Args: wsArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			return query(a, cmd, asJSON, func(ctx context.Context, c *client.Client) ([]client.Session, error) {
				ss, err := c.ListSessions(ctx, args[0])
				return ss, a.stopped(ctx, c, args[0], err)
			}, writeSessions)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the sessions as a JSON array")
	return cmd
}

// writeSessions prints sessions as a table.
func writeSessions(w io.Writer, ss []client.Session) error {
	rows := make([][]string, 0, len(ss))
	for _, s := range ss {
		status := s.Status
		if s.EndReason != "" {
			status += " (" + s.EndReason + ")"
		}
		rows = append(rows, []string{s.ID, status, s.Cwd, strconv.Itoa(s.Commands), s.Running})
	}
	return writeTable(w, []string{"ID", "STATUS", "CWD", "COMMANDS", "RUNNING"}, rows)
}

func newHistoryCmd(a *app) *cobra.Command {
	var session string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "history WS",
		Short: "List the commands a session ran",
		Long: `List the commands a session ran, oldest first: exit status, duration, output
sizes and the command's first line.`,
		Example: `  patina history demo
  patina history demo --session build --json`,
		Args: wsArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			return query(a, cmd, asJSON, func(ctx context.Context, c *client.Client) ([]client.Command, error) {
				cmds, err := c.History(ctx, args[0], session)
				return cmds, a.stopped(ctx, c, args[0], err)
			}, func(w io.Writer, cmds []client.Command) error { return writeHistory(w, cmds, a.now()) })
		},
	}
	cmd.Flags().StringVarP(&session, "session", "s", defaultSession, "the session")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the commands as a JSON array")
	return cmd
}

// writeHistory prints commands as a table. A running command's duration
// counts to now.
func writeHistory(w io.Writer, cmds []client.Command, now time.Time) error {
	rows := make([][]string, 0, len(cmds))
	for _, c := range cmds {
		rows = append(rows, []string{
			c.ID, exitText(c), durationText(c, now),
			humanBytes(c.StdoutBytes), humanBytes(c.StderrBytes),
			oneLine(c.Command, 60),
		})
	}
	return writeTable(w, []string{"ID", "EXIT", "DURATION", "STDOUT", "STDERR", "COMMAND"}, rows)
}

// exitText is a command's exit status and what stopped it, if anything.
func exitText(c client.Command) string {
	if c.State == "running" {
		return "running"
	}
	s := "?"
	if c.ExitCode != nil {
		s = strconv.Itoa(*c.ExitCode)
	}
	switch {
	case c.TimedOut:
		s += " timeout"
	case c.Interrupted:
		s += " interrupted"
	case c.SessionEnded:
		s += " ended"
	case c.State == "lost":
		s += " lost"
	}
	return s
}

func durationText(c client.Command, now time.Time) string {
	if c.StartedAt.IsZero() {
		return ""
	}
	end := now
	if c.EndedAt != nil {
		end = *c.EndedAt
	} else if c.State != "running" {
		return ""
	}
	return humanDuration(end.Sub(c.StartedAt))
}
