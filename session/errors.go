package session

import (
	"errors"
	"fmt"
)

// Sentinel errors. Check them with errors.Is: the errors returned wrap them
// with details (which session, how it ended).
var (
	// ErrNotFound: no session or command with that id.
	ErrNotFound = errors.New("not found")
	// ErrExists: a session with that id exists already.
	ErrExists = errors.New("already exists")
	// ErrBusy: the session is running a command. A session runs one command
	// at a time; a second Exec fails at once instead of queueing, so callers
	// never wait behind a command they did not start.
	ErrBusy = errors.New("session is busy running another command")
	// ErrEnded: the session's shell has ended (exit, exec, a fatal signal,
	// set -e). The wrapping error says how.
	ErrEnded = errors.New("session has ended")
	// ErrClosed: the session was closed.
	ErrClosed = errors.New("session is closed")
	// ErrNotRunning: the command has already finished.
	ErrNotRunning = errors.New("command is not running")
	// ErrInvalid: a request is malformed (bad id, env name, command text).
	ErrInvalid = errors.New("invalid request")
	// ErrLocked: another live Manager holds the session directory.
	ErrLocked = errors.New("session directory is in use by another manager")
)

// EndedError is returned (wrapping ErrEnded) for a session whose shell has
// ended, saying how.
type EndedError struct {
	Session  string
	ExitCode int    // the shell's exit status (128+N for signal N), -1 if unknown
	Reason   string // e.g. `command 4 ("exit 3")`, "closed", "process vanished"
	// Outside: no command of the session's own was running when its shell
	// died: something else killed it (kill -9 -1 or pkill in another
	// session, the OOM killer). Such a session comes back from its last
	// snapshot on its next command (Manager.Recover).
	Outside bool
}

func (e *EndedError) Error() string {
	if e.ExitCode < 0 {
		return fmt.Sprintf("session %s has ended (%s)", e.Session, e.Reason)
	}
	return fmt.Sprintf("session %s has ended with status %d (%s)", e.Session, e.ExitCode, e.Reason)
}

// Unwrap makes errors.Is(err, ErrEnded) true.
func (e *EndedError) Unwrap() error { return ErrEnded }
