package mcpserver

import (
	"context"
	"errors"
	"fmt"

	"github.com/patina-dev/patina/sidecar/client"
)

// explain turns a handler's error into the tool error a model reads: the
// sidecar's message and code, with what to do next when that is known.
func (s *server) explain(err error) error {
	var (
		ae *client.APIError
		ue *unreachableError
		ag *argError
	)
	switch {
	case errors.As(err, &ag), errors.As(err, &ue):
		return err
	case errors.As(err, &ae):
		msg := ae.Message
		if msg == "" {
			msg = "the sidecar answered " + ae.Code
		}
		msg = fmt.Sprintf("%s (code: %s)", msg, ae.Code)
		if h := hintFor(ae.Code); h != "" {
			msg += ". " + h
		}
		return errors.New(msg)
	case client.NotSent(err):
		return &unreachableError{addr: s.client().Addr(), err: err}
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("the patina sidecar did not answer in time: %v", err)
	}
	return err
}

// hintFor says what to do about an error code, for a model.
func hintFor(code string) string {
	switch code {
	case client.CodeBusy:
		return "The session is running another command (one started with background=true, or a run still in progress). " +
			"Wait for it with command_output(wait_ms=...), stop it with command_signal, or pass another session name to run in parallel"
	case client.CodeEnded:
		return "This session's shell has exited (exit, exec or a fatal signal) and its state is gone: run starts it again"
	case client.CodeStopped:
		return "The workspace's container is stopped: ask the user to run `patina ws start <workspace>`, or create a new workspace"
	case client.CodeNoRepository:
		return "This workspace was created without repo, so it has no git branch: diff, commit and merge need a workspace created with workspace_create(repo=...) (log works on any workspace)"
	case client.CodeNotRunning:
		return "The command has already finished: read its output with command_output"
	case client.CodeUnavailable:
		return "If the image is missing, the user can build the default one with `patina image build`"
	case client.CodeUnauthorized:
		return "patina mcp and the sidecar disagree on the token: the user should start both with the same --state-dir (or PATINA_TOKEN)"
	}
	return ""
}
