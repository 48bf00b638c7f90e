package client

import (
	"context"
	"errors"
)

// DefaultSession is the session the sidecar creates on first use; any
// other is created by whoever uses it first.
const DefaultSession = "default"

// SessionAPI is what EnsureSession and ResetSession need of a client
// (*Client, or a caller's stand-in).
type SessionAPI interface {
	CreateSession(ctx context.Context, ws string, req CreateSessionRequest) (Session, error)
	DeleteSession(ctx context.Context, ws, sid string) error
}

// EnsureSession creates session sid of workspace ws; one that exists
// already (made meanwhile by a concurrent caller) is fine. If the
// workspace is what is missing, the error says so (ErrNotFound).
func EnsureSession(ctx context.Context, c SessionAPI, ws, sid string) error {
	_, err := c.CreateSession(ctx, ws, CreateSessionRequest{ID: sid})
	if errors.Is(err, ErrConflict) {
		return nil
	}
	return err
}

// ResetSession gives session sid a new shell: it removes the session if it
// exists and creates it again, except DefaultSession, which the sidecar
// creates on the next exec. A missing workspace is left for that next
// call to report.
func ResetSession(ctx context.Context, c SessionAPI, ws, sid string) error {
	if err := c.DeleteSession(ctx, ws, sid); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	if sid == DefaultSession {
		return nil
	}
	return EnsureSession(ctx, c, ws, sid)
}
