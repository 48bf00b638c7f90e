package main

import (
	"context"
	"errors"
	"fmt"
	"time"

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
	from := ""
	if c.AddrFrom != "default" {
		from = " (from " + c.AddrFrom + ")"
	}
	var apiErr *client.APIError
	var noAnswer *noAnswerError
	var msgErr *messageError
	switch {
	case client.NotSent(err):
		return fmt.Sprintf("cannot reach the sidecar at %s%s: %v\n"+
			"Is it running? Start it with `patina serve` (state directory %s),\n"+
			"or point patina at it with --addr or %s.",
			c.Addr, from, client.RootCause(err), c.StateDir, envAddr)
	case errors.As(err, &noAnswer):
		return fmt.Sprintf("the sidecar at %s%s did not answer within %s.\n"+
			"Is it hung (its log may say why), or is something other than `patina serve` listening there?",
			c.Addr, from, noAnswer.after)
	case errors.As(err, &msgErr):
		return msgErr.msg
	case errors.Is(err, client.ErrNotSidecar):
		return fmt.Sprintf("the server at %s%s could not prove it holds the token from %s, so patina did not send it: "+
			"the token is not that sidecar's (is that the right state directory (--state-dir, %s) or token (--token, %s)?), "+
			"or another program listens there (is `patina serve` running?)",
			c.Addr, from, c.TokenFrom, envStateDir, envToken)
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
	case client.CodeEnded:
		return "Run in another session (--session NAME), or start this one again in a new shell with `patina exec --fresh` (its history is deleted)."
	case client.CodeNotListening:
		return "Start the server inside the workspace first (it may listen on 127.0.0.1, ::1 or all addresses), then forward its port."
	}
	return ""
}

// noAnswerError is a call the sidecar did not answer within its bound.
type noAnswerError struct {
	after time.Duration
	err   error
}

func (e *noAnswerError) Error() string {
	return fmt.Sprintf("the sidecar did not answer within %s: %v", e.after, e.err)
}

func (e *noAnswerError) Unwrap() error { return e.err }

// messageError is an error the CLI explains in its own words (msg) rather
// than with the sidecar's message, having asked the sidecar for what it
// needed to say more.
type messageError struct {
	msg string
	err error
}

func (e *messageError) Error() string { return e.msg }

func (e *messageError) Unwrap() error { return e.err }

// stopped explains the sidecar's answer that workspace ws is stopped with
// the command that starts it; other errors pass through.
func (a *app) stopped(ctx context.Context, c *client.Client, ws string, err error) error {
	if !errors.Is(err, client.ErrStopped) {
		return err
	}
	ctx, cancel := callContext(ctx, a.queryTimeout)
	defer cancel()
	w, gerr := c.GetWorkspace(ctx, ws)
	if gerr != nil {
		return err
	}
	why := ""
	if w.Error != "" {
		why = " (" + w.Error + ")"
	}
	return &messageError{err: err, msg: fmt.Sprintf("workspace %s is %s%s.\n"+
		"Start it again with `patina ws start %s`: its files and its sessions' state are kept.",
		w.Name, w.Status, why, w.Name)}
}
