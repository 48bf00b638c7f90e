package main

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/patina-dev/patina/sidecar/client"
)

// completionTimeout bounds the sidecar query behind one completion: a
// shell waits for it at every TAB.
const completionTimeout = 2 * time.Second

// addCompletions makes the commands under c complete workspace names where
// their first argument is a workspace ("WS" or "SRC" in Use; every argument
// of "rm WS..."), and session names for --session. Nothing else is offered
// in their place: no file names.
func (a *app) addCompletions(c *cobra.Command) {
	words := strings.Fields(c.Use)
	if len(words) > 1 && (words[1] == "WS" || words[1] == "SRC" || words[1] == "WS...") && c.ValidArgsFunction == nil {
		many := words[1] == "WS..."
		c.ValidArgsFunction = func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 && !many {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return a.workspaceNames(cmd.Context()), cobra.ShellCompDirectiveNoFileComp
		}
	}
	if c.Flags().Lookup("session") != nil {
		_ = c.RegisterFlagCompletionFunc("session", func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) == 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return a.sessionNames(cmd.Context(), args[0]), cobra.ShellCompDirectiveNoFileComp
		})
	}
	for _, sub := range c.Commands() {
		a.addCompletions(sub)
	}
}

// workspaceNames asks the sidecar for its workspaces' names; nothing when it
// does not answer in time.
func (a *app) workspaceNames(ctx context.Context) []string {
	return a.completionQuery(ctx, func(ctx context.Context, c *client.Client) ([]string, error) {
		wss, err := c.ListWorkspaces(ctx)
		names := make([]string, 0, len(wss))
		for _, w := range wss {
			names = append(names, w.Name)
		}
		return names, err
	})
}

// sessionNames asks the sidecar for the sessions of workspace ws.
func (a *app) sessionNames(ctx context.Context, ws string) []string {
	return a.completionQuery(ctx, func(ctx context.Context, c *client.Client) ([]string, error) {
		ss, err := c.ListSessions(ctx, ws)
		names := make([]string, 0, len(ss))
		for _, s := range ss {
			names = append(names, s.ID)
		}
		return names, err
	})
}

// completionQuery runs one sidecar query for a completion, bounded by
// completionTimeout; nothing when the sidecar cannot be reached or fails.
func (a *app) completionQuery(ctx context.Context, query func(context.Context, *client.Client) ([]string, error)) []string {
	c, err := a.client()
	if err != nil {
		return nil
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, completionTimeout)
	defer cancel()
	names, err := query(ctx, c)
	if err != nil {
		return nil
	}
	return names
}
