package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/patina-dev/patina/sidecar/client"
)

// sidecarComeback bounds how long patina exec waits for a sidecar that
// went away during a command (killed, restarted) to answer again: a
// restart takes seconds; a sidecar that is not restarted should not hold
// the terminal for long.
const sidecarComeback = 60 * time.Second

// comebackPoll is how often it asks whether the sidecar is back.
const comebackPoll = 250 * time.Millisecond

// followLost picks up command lost.CommandID after the connection to the
// sidecar broke during the command: it waits (at most sidecarComeback) for
// a sidecar to answer on the state directory again, then passes on the
// output the stream had not delivered and returns the command's result.
// If none comes back, it says how to fetch the result later.
func (a *app) followLost(ctx context.Context, ws, sid string, lost *client.StreamLostError, onOutput func(string, []byte)) (client.ExecResult, error) {
	fmt.Fprintf(a.stderr, "patina: lost the connection to the sidecar during command %s (%v); the command carries on in the workspace; waiting up to %s for the sidecar to come back\n",
		lost.CommandID, lost.Err, sidecarComeback)
	deadline := time.Now().Add(sidecarComeback)
	for {
		c, err := a.client()
		if err == nil {
			hctx, cancel := context.WithTimeout(ctx, healthWait)
			err = c.Health(hctx)
			cancel()
		}
		if err == nil {
			cmd, err := c.FollowCommand(ctx, ws, sid, lost.CommandID, lost.Next, onOutput)
			if err == nil {
				return commandResult(cmd), nil
			}
			if ctx.Err() != nil {
				return client.ExecResult{}, err
			}
			var apiErr *client.APIError
			if errors.As(err, &apiErr) {
				return client.ExecResult{}, a.fetchLater(ws, sid, lost.CommandID, err)
			}
			// The sidecar went away again: keep waiting while time is left.
		}
		if time.Now().After(deadline) {
			return client.ExecResult{}, a.fetchLater(ws, sid, lost.CommandID, fmt.Errorf("the sidecar did not come back within %s", sidecarComeback))
		}
		select {
		case <-ctx.Done():
			return client.ExecResult{}, ctx.Err()
		case <-time.After(comebackPoll):
		}
	}
}

// fetchLater is the error that says how to get a lost command's result.
func (a *app) fetchLater(ws, sid, cid string, why error) error {
	return fmt.Errorf("%v; command %s of session %q may still be running or have finished: once the sidecar runs, "+
		"`patina history %s --session %s` shows its exit status, and its output is at "+
		"GET /v1/workspaces/%s/sessions/%s/commands/%s/stdout (and /stderr)", why, cid, sid, ws, sid, ws, sid, cid)
}

// commandResult is what reportExec needs of a command's record.
func commandResult(c client.Command) client.ExecResult {
	res := client.ExecResult{
		CommandID:     c.ID,
		ExitCode:      -1,
		TimedOut:      c.TimedOut,
		Interrupted:   c.Interrupted,
		SessionEnded:  c.SessionEnded,
		ShellReplaced: c.ShellReplaced,
		StdoutBytes:   c.StdoutBytes,
		StderrBytes:   c.StderrBytes,
	}
	if c.ExitCode != nil {
		res.ExitCode = *c.ExitCode
	}
	return res
}
