package sidecar

import (
	"errors"
	"net/http"
	"strings"

	"github.com/patina-dev/patina/sidecar/client"
	"github.com/patina-dev/patina/sidecar/workspace"
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
// where errors become statuses: the HTTP layer's own errors, and the
// domain's kinds (workspace.Kind).
func status(err error) (int, string) {
	var mbe *http.MaxBytesError
	switch {
	case errors.Is(err, errUnauthorized):
		return http.StatusUnauthorized, client.CodeUnauthorized
	case errors.Is(err, errMethod):
		return http.StatusMethodNotAllowed, client.CodeMethodNotAllowed
	case errors.Is(err, errTooLarge), errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, client.CodeTooLarge
	case errors.Is(err, errPreviewRedirect):
		return http.StatusUnprocessableEntity, client.CodeRejected
	case errors.Is(err, errUnavailable):
		return http.StatusServiceUnavailable, client.CodeUnavailable
	}
	if s, ok := kindStatus[workspace.Kind(err)]; ok {
		return s.status, s.code
	}
	return http.StatusInternalServerError, client.CodeInternal
}

// kindStatus is the status and code of each of the domain's kinds.
var kindStatus = map[error]struct {
	status int
	code   string
}{
	workspace.ErrInvalid:          {http.StatusBadRequest, client.CodeInvalid},
	workspace.ErrNotFound:         {http.StatusNotFound, client.CodeNotFound},
	workspace.ErrBusy:             {http.StatusConflict, client.CodeBusy},
	workspace.ErrStopped:          {http.StatusConflict, client.CodeStopped},
	workspace.ErrEnded:            {http.StatusConflict, client.CodeEnded},
	workspace.ErrNotRunning:       {http.StatusConflict, client.CodeNotRunning},
	workspace.ErrNotListening:     {http.StatusConflict, client.CodeNotListening},
	workspace.ErrNoRepository:     {http.StatusConflict, client.CodeNoRepository},
	workspace.ErrConflict:         {http.StatusConflict, client.CodeConflict},
	workspace.ErrRejected:         {http.StatusUnprocessableEntity, client.CodeRejected},
	workspace.ErrTooLarge:         {http.StatusRequestEntityTooLarge, client.CodeTooLarge},
	workspace.ErrAdopting:         {http.StatusServiceUnavailable, client.CodeAdopting},
	workspace.ErrAgentUnavailable: {http.StatusServiceUnavailable, client.CodeAgentUnavailable},
	workspace.ErrUnavailable:      {http.StatusServiceUnavailable, client.CodeUnavailable},
}

// categories are the sentinels that name a kind of failure, which the
// answer's code already says. Wrapped with "%w: ...", their text leads the
// message, sometimes twice (each layer that wraps adds it again).
var categories = append([]error{errInvalid, errNotFound, errTooLarge}, workspace.Categories...)

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
