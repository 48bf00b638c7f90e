package sidecar

import (
	"errors"
	"net/http"
	"os"
	"strings"
	"syscall"

	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/sidecar/client"
	"github.com/patina-dev/patina/sidecar/image"
	"github.com/patina-dev/patina/worktree"
)

// Sentinel errors of the service; session and worktree errors map too.
var (
	errInvalid      = errors.New("invalid request")
	errNotFound     = errors.New("not found")
	errExists       = errors.New("already exists")
	errStopped      = errors.New("stopped")
	errNoRepository = errors.New("workspace has no git repository")
	errUnauthorized = errors.New("missing or wrong bearer token")
	errTooLarge     = errors.New("request body too large")
	errEscapes      = errors.New("path escapes the workspace")
	errMethod       = errors.New("method not allowed")
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
	case errors.Is(err, errTooLarge), errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, client.CodeTooLarge
	case errors.Is(err, errInvalid), errors.Is(err, errEscapes),
		errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENAMETOOLONG),
		errors.Is(err, session.ErrInvalid), errors.Is(err, worktree.ErrInvalidName),
		errors.Is(err, worktree.ErrUnsupported), errors.Is(err, image.ErrInvalid):
		return http.StatusBadRequest, client.CodeInvalid
	case errors.Is(err, errNotFound), errors.Is(err, session.ErrNotFound),
		errors.Is(err, worktree.ErrNotFound), errors.Is(err, os.ErrNotExist):
		return http.StatusNotFound, client.CodeNotFound
	case errors.Is(err, session.ErrBusy):
		return http.StatusConflict, client.CodeBusy
	case errors.Is(err, errStopped):
		return http.StatusConflict, client.CodeStopped
	case errors.Is(err, session.ErrEnded), errors.Is(err, session.ErrClosed):
		return http.StatusConflict, client.CodeEnded
	case errors.Is(err, session.ErrNotRunning):
		return http.StatusConflict, client.CodeNotRunning
	case errors.Is(err, errNoRepository):
		return http.StatusConflict, client.CodeNoRepository
	case errors.Is(err, errExists), errors.Is(err, session.ErrExists),
		errors.Is(err, worktree.ErrExists), errors.Is(err, worktree.ErrConflict),
		errors.Is(err, worktree.ErrDirty), errors.Is(err, worktree.ErrMissing),
		errors.Is(err, worktree.ErrNoTarget), errors.Is(err, os.ErrExist):
		return http.StatusConflict, client.CodeConflict
	case errors.Is(err, image.ErrMissing):
		return http.StatusServiceUnavailable, client.CodeUnavailable
	}
	return http.StatusInternalServerError, client.CodeInternal
}

// fileError classifies an os.Root error: os.Root reports a path that leaves
// the root (by .. or a symlink) only in its message, so this is the one
// place that reads it.
func fileError(err error) error {
	if err != nil && strings.Contains(err.Error(), "path escapes from parent") {
		return errors.Join(errEscapes, err)
	}
	return err
}
