package workspace

import (
	"errors"
	"fmt"
)

// Sentinel errors. The Manager's errors wrap these, or errors of what it
// drives (session, worktree, the agent, the engine) that Kind maps to
// them; check them with errors.Is, or ask Kind.
var (
	// ErrInvalid: a request is malformed or out of range.
	ErrInvalid = errors.New("invalid request")
	// ErrNotFound: no such workspace (or session, command, file).
	ErrNotFound = errors.New("not found")
	// ErrExists: a workspace of that name exists.
	ErrExists = errors.New("already exists")
	// ErrStopped: the workspace is stopped; start it.
	ErrStopped = errors.New("stopped")
	// ErrNoRepository: a git operation on a workspace made without a
	// repository.
	ErrNoRepository = errors.New("workspace has no git repository")
	// ErrAdopting: the workspace is still being adopted after a restart of
	// the sidecar and did not become ready in time.
	ErrAdopting = errors.New("workspace is being adopted")
	// ErrUnsupported: the engine cannot do this (a repository workspace on a
	// remote engine).
	ErrUnsupported = errors.New("not supported")
	// ErrBusy: the session runs another command.
	ErrBusy = errors.New("session is busy")
	// ErrEnded: the session's shell has ended.
	ErrEnded = errors.New("session has ended")
	// ErrNotRunning: the command has already finished.
	ErrNotRunning = errors.New("command is not running")
	// ErrNotListening: nothing listens on that port in the workspace.
	ErrNotListening = errors.New("nothing listens on that port in the workspace")
	// ErrConflict: it exists already, a merge would conflict, a tree is
	// dirty, or the work was not what was reviewed.
	ErrConflict = errors.New("conflict")
	// ErrRejected: objects a workspace sent failed patina's checks.
	ErrRejected = errors.New("rejected")
	// ErrTooLarge: a body, file, pack or object over its limit.
	ErrTooLarge = errors.New("too large")
	// ErrAgentUnavailable: the workspace's agent cannot be reached, or
	// misbehaves; only its workspace is affected.
	ErrAgentUnavailable = errors.New("workspace agent unavailable")
	// ErrUnavailable: something the workspace needs is missing or down (an
	// image, a swarm node, the agent's binary).
	ErrUnavailable = errors.New("unavailable")
)

// FieldError is a failure that a request's field caused (a branch or
// template it names that does not exist): the answer names the field.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// fieldError says that field of the request names nothing: invalid (400),
// not a missing workspace (404).
func fieldError(field string, err error) error {
	return &FieldError{Field: field, Err: fmt.Errorf("%w: %s: %w", ErrInvalid, field, err)}
}
