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
	RestartSession(ctx context.Context, ws, sid string) (Session, error)
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

// SessionCall is one call in a session, for InSession.
type SessionCall struct {
	Workspace, Session string
	// Restart starts a session whose shell has ended (exit, exec, a fatal
	// signal) again, calling OnRestart first; the new shell's state is
	// reset to the session's creation settings, its history and command
	// ids go on. Without it such a call fails with ErrEnded.
	Restart   bool
	OnRestart func()
}

// InSession runs call (a request in session sc.Session of workspace
// sc.Workspace) and, when the session is not usable, makes it so and runs
// call once more: a session that does not exist is created (the sidecar
// creates only DefaultSession on first use), and, with sc.Restart, one
// whose shell has ended is started again. Nothing ran the first time in
// either case: the sidecar refuses before starting a command. If the
// workspace is what is missing, the error says so (ErrNotFound). This is
// the one place the CLI, the MCP server and the Dagger glue keep this
// policy.
func InSession(ctx context.Context, c SessionAPI, sc SessionCall, call func() error) error {
	err := call()
	switch {
	case errors.Is(err, ErrNotFound) && sc.Session != DefaultSession:
		err = EnsureSession(ctx, c, sc.Workspace, sc.Session)
	case sc.Restart && errors.Is(err, ErrEnded):
		if _, err = c.RestartSession(ctx, sc.Workspace, sc.Session); err == nil && sc.OnRestart != nil {
			sc.OnRestart()
		}
	default:
		return err
	}
	if err != nil {
		return err
	}
	return call()
}
