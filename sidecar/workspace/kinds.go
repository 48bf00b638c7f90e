package workspace

import (
	"errors"
	"os"
	"syscall"

	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/sidecar/agent"
	"github.com/patina-dev/patina/sidecar/agent/wire"
	"github.com/patina-dev/patina/sidecar/engine"
	"github.com/patina-dev/patina/sidecar/secrets"
	"github.com/patina-dev/patina/sidecar/template"
	"github.com/patina-dev/patina/worktree"
)

// kinds maps the errors of what the domain drives (the agent's answers,
// sessions, git, the engine, templates, secrets, file calls) to the
// domain's own sentinels, in order: the first kind an error matches is
// its kind. Adapters see only the domain's sentinels (Kind).
var kinds = []struct {
	kind error
	from []error
}{
	{ErrTooLarge, []error{wire.ErrTooLarge, template.ErrTooLarge}},
	{ErrInvalid, []error{ErrUnsupported, wire.ErrEscapes, syscall.ENOTDIR, syscall.EISDIR, syscall.ENAMETOOLONG,
		session.ErrInvalid, worktree.ErrInvalidName, worktree.ErrUnsupported, secrets.ErrInvalid,
		template.ErrInvalid, template.ErrBuild}},
	{ErrNotFound, []error{session.ErrNotFound, worktree.ErrNotFound, os.ErrNotExist, secrets.ErrNotFound,
		template.ErrNotFound}},
	{ErrBusy, []error{session.ErrBusy}},
	{ErrStopped, nil},
	{ErrEnded, []error{session.ErrEnded, session.ErrClosed}},
	{ErrNotRunning, []error{session.ErrNotRunning}},
	{ErrNotListening, []error{wire.ErrNotListening}},
	{ErrNoRepository, nil},
	{ErrConflict, []error{ErrExists, ErrUnreviewed, session.ErrExists, worktree.ErrExists, worktree.ErrConflict,
		worktree.ErrDirty, worktree.ErrNoTarget, wire.ErrConflict, os.ErrExist, template.ErrInUse,
		template.ErrExists}},
	{ErrRejected, []error{worktree.ErrRejected}},
	{ErrTooLarge, []error{worktree.ErrTooLarge}},
	{ErrAdopting, nil},
	{ErrAgentUnavailable, []error{agent.ErrUnavailable, session.ErrLocked}},
	{ErrUnavailable, []error{engine.ErrImageMissing, engine.ErrNodeDown, engine.ErrAgentBinary, engine.ErrNotPlaced}},
}

// Kind returns the domain sentinel that names err's kind of failure (one
// of ErrInvalid, ErrNotFound, ErrBusy, ErrStopped, ErrEnded,
// ErrNotRunning, ErrNotListening, ErrNoRepository, ErrConflict,
// ErrRejected, ErrTooLarge, ErrAdopting, ErrAgentUnavailable,
// ErrUnavailable), or nil: an internal failure.
func Kind(err error) error {
	if err == nil {
		return nil
	}
	for _, k := range kinds {
		if errors.Is(err, k.kind) {
			return k.kind
		}
		for _, e := range k.from {
			if errors.Is(err, e) {
				return k.kind
			}
		}
	}
	return nil
}

// Categories are the sentinels whose text can lead an error's message
// ("invalid request: ..."): the kind says it already, so an answer may
// drop them.
var Categories = []error{
	ErrInvalid, ErrNotFound, ErrExists,
	session.ErrInvalid, session.ErrNotFound, session.ErrExists, session.ErrBusy,
}
