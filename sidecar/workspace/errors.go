package workspace

import "errors"

// Sentinel errors. The Manager's errors wrap these, session's (ErrBusy,
// ErrEnded ...), worktree's (ErrConflict, ErrDirty ...) and agent's
// (ErrUnavailable, ErrEscapes, ErrTooLarge); check them with errors.Is.
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
)
