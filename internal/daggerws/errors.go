package daggerws

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"

	"github.com/patina-dev/patina/sidecar/client"
)

// Errors for arguments the glue refuses before calling the sidecar.
var (
	// ErrNoWorkspace: a function that acts on one workspace was called
	// without a name.
	ErrNoWorkspace = errors.New("no workspace selected: pass --name NAME to workspace " +
		"(`workspace ... list` shows the names)")
	// ErrNoToken: the token secret is empty.
	ErrNoToken = errors.New("the sidecar token is empty: pass the token `patina serve` uses " +
		"with --token env:PATINA_TOKEN")
	// ErrInvalid: an argument is malformed (the message says which).
	ErrInvalid = errors.New("invalid argument")
)

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// ExitError is a command that exited non-zero or timed out. Its message
// holds the exit code, the trimmed stderr and the tail of stdout, which is
// what `dagger call` shows of a failed call.
type ExitError struct {
	Workspace string
	Session   string
	Command   string
	ExitCode  int
	// TimedOut says the sidecar stopped the command after TimeoutMS.
	TimedOut  bool
	TimeoutMS int64
	// SessionEnded says the command ended the session's shell.
	SessionEnded bool
	// Notice is the sidecar's remark about the session, if any.
	Notice string
	// Stdout and Stderr are the command's output (both whole, or head and
	// tail joined by an omission marker when very long).
	Stdout string
	Stderr string
}

// Limits of what an ExitError's message shows of the output.
const (
	stderrHead = 2 << 10
	stderrTail = 6 << 10
	stdoutTail = 4 << 10
	commandMax = 200
)

func (e *ExitError) Error() string {
	var b strings.Builder
	what := fmt.Sprintf("exit code %d", e.ExitCode)
	if e.TimedOut {
		what = fmt.Sprintf("timed out after %d ms (exit code %d)", e.TimeoutMS, e.ExitCode)
	}
	fmt.Fprintf(&b, "command failed in workspace %q, session %q: %s\ncommand: %s",
		e.Workspace, e.Session, what, oneLine(e.Command, commandMax))
	if e.SessionEnded {
		fmt.Fprintf(&b, "\nthe command ended the session's shell (`exit` in a command line does that): "+
			"pass --fresh to start session %q again, or use another --session", e.Session)
	}
	if e.Notice != "" {
		fmt.Fprintf(&b, "\nsidecar: %s", e.Notice)
	}
	if e.Stderr != "" {
		fmt.Fprintf(&b, "\nstderr:\n%s", strings.TrimRight(trimMiddle(e.Stderr, stderrHead, stderrTail), "\n"))
	}
	if e.Stdout != "" {
		label := "stdout:"
		if len(e.Stdout) > stdoutTail {
			label = fmt.Sprintf("stdout (last %d of %d bytes):", stdoutTail, len(e.Stdout))
		}
		fmt.Fprintf(&b, "\n%s\n%s", label, strings.TrimRight(trimMiddle(e.Stdout, 0, stdoutTail), "\n"))
	}
	if e.Stderr == "" && e.Stdout == "" {
		b.WriteString("\n(no output)")
	}
	b.WriteString("\n(pass --allow-failure to get stdout despite a failure)")
	return b.String()
}

// hintError adds a line saying what to do to an error, keeping the chain.
type hintError struct {
	err  error
	hint string
}

func (e *hintError) Error() string { return e.err.Error() + "\n" + e.hint }
func (e *hintError) Unwrap() error { return e.err }

// addresser is what explain needs of a client: where it sends requests.
type addresser interface{ Addr() string }

// explain names the operation and adds a hint when the cure is known.
func explain(c addresser, op string, ws string, err error) error {
	if hint := hintFor(c, ws, err); hint != "" {
		err = &hintError{err: err, hint: hint}
	}
	return fmt.Errorf("%s: %w", op, err)
}

func hintFor(c addresser, ws string, err error) string {
	var apiErr *client.APIError
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return ""
	case unreachable(err):
		return fmt.Sprintf("Nothing answered at the sidecar's endpoint (%s). Is `patina serve` running on the host, "+
			"and does --sidecar name its port (tcp://localhost:7070 for the default 127.0.0.1:7070)?", c.Addr())
	case !errors.As(err, &apiErr):
		return ""
	}
	switch apiErr.Code {
	case client.CodeUnauthorized:
		return "The sidecar refused the token. Pass the token of the sidecar you started: --token env:PATINA_TOKEN " +
			"with PATINA_TOKEN set to `patina serve`'s --token (or its PATINA_TOKEN), else to the contents of " +
			"<state-dir>/token (~/.local/state/patina/token by default)."
	case client.CodeNotFound:
		if ws != "" {
			return fmt.Sprintf("The sidecar has no workspace %q (or no such session); `workspace ... list` shows its workspaces.", ws)
		}
	case client.CodeNoRepository:
		return fmt.Sprintf("Workspace %q was created without --repo: it has no git branch to diff, commit or merge.", ws)
	case client.CodeStopped:
		return fmt.Sprintf("Workspace %q is stopped; start it on the host with `patina ws start %s`.", ws, ws)
	case client.CodeBusy:
		return "The session runs another command; wait for it, or pass another --session."
	case client.CodeEnded:
		return "The session's shell has ended (a command ran `exit`); pass --fresh to start it again in a new shell, or use another --session."
	}
	return ""
}

// unreachable reports whether err means nothing answered at the endpoint:
// refused or failed dials, and connections closed before an answer (what a
// tunnel to a port nobody listens on gives).
func unreachable(err error) bool {
	return client.NotSent(err) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		closedBeforeRequest(err)
}

// closedBeforeRequest reports net/http's error for a connection the other
// end closed before the request was written. net/http does not export it
// (errServerClosedIdle), so its text is the only way to tell; whether it or
// io.EOF comes back depends on which of the transport's goroutines notices
// the close first.
func closedBeforeRequest(err error) bool {
	return strings.Contains(err.Error(), "http: server closed idle connection")
}
