package sidecar

import (
	"errors"
	"net/http"
	"os"
	"strings"
	"syscall"

	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/sidecar/agent"
	"github.com/patina-dev/patina/sidecar/client"
	"github.com/patina-dev/patina/sidecar/container"
	"github.com/patina-dev/patina/sidecar/image"
	"github.com/patina-dev/patina/sidecar/secrets"
	"github.com/patina-dev/patina/sidecar/template"
	"github.com/patina-dev/patina/sidecar/workspace"
	"github.com/patina-dev/patina/worktree"
)

// Errors of the HTTP layer itself; the domain's map too.
var (
	errInvalid      = workspace.ErrInvalid
	errNotFound     = workspace.ErrNotFound
	errUnauthorized = errors.New("missing or wrong bearer token")
	errTooLarge     = errors.New("request body too large")
	errMethod       = errors.New("method not allowed")
	errUnavailable  = errors.New("unavailable")
)

// status maps an error to its HTTP status and API code. It is the one place
// where errors become statuses.
func status(err error) (int, string) {
	var mbe *http.MaxBytesError
	switch {
	case errors.Is(err, errUnauthorized):
		return http.StatusUnauthorized, client.CodeUnauthorized
	case errors.Is(err, errMethod):
		return http.StatusMethodNotAllowed, client.CodeMethodNotAllowed
	case errors.Is(err, errTooLarge), errors.As(err, &mbe), errors.Is(err, agent.ErrTooLarge):
		return http.StatusRequestEntityTooLarge, client.CodeTooLarge
	case errors.Is(err, workspace.ErrInvalid), errors.Is(err, agent.ErrEscapes),
		errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENAMETOOLONG),
		errors.Is(err, session.ErrInvalid), errors.Is(err, worktree.ErrInvalidName),
		errors.Is(err, worktree.ErrUnsupported), errors.Is(err, image.ErrInvalid),
		errors.Is(err, workspace.ErrUnsupported), errors.Is(err, secrets.ErrInvalid),
		errors.Is(err, template.ErrInvalid), errors.Is(err, template.ErrBuild):
		return http.StatusBadRequest, client.CodeInvalid
	case errors.Is(err, workspace.ErrNotFound), errors.Is(err, session.ErrNotFound),
		errors.Is(err, worktree.ErrNotFound), errors.Is(err, os.ErrNotExist), errors.Is(err, secrets.ErrNotFound),
		errors.Is(err, template.ErrNotFound):
		return http.StatusNotFound, client.CodeNotFound
	case errors.Is(err, session.ErrBusy):
		return http.StatusConflict, client.CodeBusy
	case errors.Is(err, workspace.ErrStopped):
		return http.StatusConflict, client.CodeStopped
	case errors.Is(err, session.ErrEnded), errors.Is(err, session.ErrClosed):
		return http.StatusConflict, client.CodeEnded
	case errors.Is(err, session.ErrNotRunning):
		return http.StatusConflict, client.CodeNotRunning
	case errors.Is(err, agent.ErrNotListening):
		return http.StatusConflict, client.CodeNotListening
	case errors.Is(err, workspace.ErrNoRepository):
		return http.StatusConflict, client.CodeNoRepository
	case errors.Is(err, workspace.ErrExists), errors.Is(err, session.ErrExists),
		errors.Is(err, worktree.ErrExists), errors.Is(err, worktree.ErrConflict),
		errors.Is(err, worktree.ErrDirty), errors.Is(err, worktree.ErrNoTarget),
		errors.Is(err, agent.ErrConflict), errors.Is(err, os.ErrExist),
		errors.Is(err, workspace.ErrUnreviewed), errors.Is(err, template.ErrInUse):
		return http.StatusConflict, client.CodeConflict
	case errors.Is(err, worktree.ErrRejected), errors.Is(err, errPreviewRedirect):
		return http.StatusUnprocessableEntity, client.CodeRejected
	case errors.Is(err, worktree.ErrTooLarge):
		return http.StatusRequestEntityTooLarge, client.CodeTooLarge
	case errors.Is(err, workspace.ErrAdopting):
		return http.StatusServiceUnavailable, client.CodeAdopting
	case errors.Is(err, agent.ErrUnavailable), errors.Is(err, session.ErrLocked):
		return http.StatusServiceUnavailable, client.CodeAgentUnavailable
	case errors.Is(err, errUnavailable), errors.Is(err, image.ErrMissing), errors.Is(err, container.ErrNodeDown), errors.Is(err, container.ErrAgentBinary),
		errors.Is(err, container.ErrNotPlaced):
		return http.StatusServiceUnavailable, client.CodeUnavailable
	}
	return http.StatusInternalServerError, client.CodeInternal
}

// categories are the sentinels that name a kind of failure, which the
// answer's code already says. Wrapped with "%w: ...", their text leads the
// message, sometimes twice (each layer that wraps adds it again).
var categories = []error{
	workspace.ErrInvalid, workspace.ErrNotFound, workspace.ErrExists,
	session.ErrInvalid, session.ErrNotFound, session.ErrExists, session.ErrBusy,
	errInvalid, errNotFound, errTooLarge,
}

// message is what an answer's "error" says: err's text without the
// leading category sentinels it wraps (the code names the category), so
// that each thing is said once.
func message(err error) string {
	msg := err.Error()
	for trimmed := true; trimmed; {
		trimmed = false
		for _, c := range categories {
			if p := c.Error() + ": "; strings.HasPrefix(msg, p) && errors.Is(err, c) {
				msg, trimmed = msg[len(p):], true
			}
		}
	}
	return msg
}
