package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/patina-dev/patina/sidecar/client"
)

// explain turns an error into the message patina prints after "patina: ",
// with a hint when the cure is known: how to start the sidecar, where the
// token comes from, how to start a stopped workspace.
func (a *app) explain(err error) string {
	c := a.conn
	if c == nil {
		return err.Error()
	}
	var apiErr *client.APIError
	switch {
	case client.NotSent(err):
		from := ""
		if c.AddrFrom != "default" {
			from = " (from " + c.AddrFrom + ")"
		}
		return fmt.Sprintf("cannot reach the sidecar at %s%s: %v\n"+
			"Is it running? Start it with `patina serve` (state directory %s),\n"+
			"or point patina at it with --addr or %s.",
			c.Addr, from, client.RootCause(err), c.StateDir, envAddr)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("the sidecar at %s did not answer within %s: %v", c.Addr, a.apiTimeout, err)
	case errors.As(err, &apiErr) && apiErr.Code == client.CodeUnauthorized:
		if c.TokenFrom == "" {
			return fmt.Sprintf("the sidecar at %s wants a token and patina has none: "+
				"pass --token or set %s (the sidecar keeps its token in <state-dir>/%s; looked in %s)",
				c.Addr, envToken, tokenFile, c.StateDir)
		}
		return fmt.Sprintf("the sidecar at %s refused the token from %s: "+
			"is that the right state directory (--state-dir, %s) or token (--token, %s)?",
			c.Addr, c.TokenFrom, envStateDir, envToken)
	case errors.As(err, &apiErr):
		msg := apiErr.Message
		if msg == "" {
			msg = apiErr.Code
		}
		if hint := hintFor(apiErr.Code); hint != "" {
			msg += "\n" + hint
		}
		return msg
	}
	return err.Error()
}

// hintFor suggests what to do about an API error code.
func hintFor(code string) string {
	switch code {
	case client.CodeBusy:
		return "The session runs another command; wait for it, or use another session (--session)."
	case client.CodeEnded:
		return "Run in another session (--session NAME), or start this one again in a new shell with `patina exec --fresh` (its history is deleted)."
	}
	return ""
}
