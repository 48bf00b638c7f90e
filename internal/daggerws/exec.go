package daggerws

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/patina-dev/patina/sidecar/client"
)

// DefaultSession is the session Exec runs in when none is named; the
// sidecar creates it on first use.
const DefaultSession = client.DefaultSession

// MaxStdout bounds the stdout Exec returns whole. Longer output (the
// sidecar keeps it all) comes back as its head and tail around a marker.
const MaxStdout = 64 << 20

// ExecRequest is what Exec needs.
type ExecRequest struct {
	Workspace string
	// Session is the persistent shell to run in (default "default");
	// one that does not exist is created.
	Session string
	// Command is a bash command line.
	Command string
	// TimeoutMS stops the command after this many milliseconds (0: none).
	TimeoutMS int64
	// AllowFailure returns stdout even when the command fails.
	AllowFailure bool
	// Fresh removes the session first (its shell state and history), so
	// the command runs in a new shell.
	Fresh bool
}

// Validate checks a request without calling the sidecar.
func (r ExecRequest) Validate() error {
	switch {
	case r.Workspace == "":
		return ErrNoWorkspace
	case strings.TrimSpace(r.Command) == "":
		return invalidf("the command is empty (--cmd)")
	case r.TimeoutMS < 0:
		return invalidf("the timeout must not be negative, got %d ms", r.TimeoutMS)
	}
	return nil
}

// Exec runs a command in a workspace's session, waits for it and returns
// its stdout. A non-zero exit or a timeout is an *ExitError, unless
// AllowFailure is set.
func Exec(ctx context.Context, c API, req ExecRequest) (string, error) {
	if err := req.Validate(); err != nil {
		return "", err
	}
	if req.Session == "" {
		req.Session = DefaultSession
	}
	op := fmt.Sprintf("exec in workspace %q, session %q", req.Workspace, req.Session)
	if req.Fresh {
		// A session that is not there is fine; a missing workspace makes
		// the exec below fail with not found.
		if err := c.DeleteSession(ctx, req.Workspace, req.Session); err != nil && !errors.Is(err, client.ErrNotFound) {
			return "", explain(c, op, req.Workspace, err)
		}
	}
	// A named session is created on first use; one whose shell has ended
	// fails (the error says so, and --fresh starts it again).
	creq := client.ExecRequest{Command: req.Command, TimeoutMS: req.TimeoutMS}
	var res client.ExecResult
	err := client.InSession(ctx, c, client.SessionCall{Workspace: req.Workspace, Session: req.Session}, func() (err error) {
		res, err = c.Exec(ctx, req.Workspace, req.Session, creq)
		return err
	})
	if err != nil {
		return "", explain(c, op, req.Workspace, err)
	}
	stdout := wholeStdout(ctx, c, req, res)
	if (res.ExitCode != 0 || res.TimedOut) && !req.AllowFailure {
		return "", &ExitError{
			Workspace:    req.Workspace,
			Session:      req.Session,
			Command:      req.Command,
			ExitCode:     res.ExitCode,
			TimedOut:     res.TimedOut,
			TimeoutMS:    req.TimeoutMS,
			SessionEnded: res.SessionEnded,
			Notice:       res.Notice,
			Stdout:       stdout,
			Stderr:       joined(res.StderrData(), res.StderrTruncated, res.StderrTail, res.StderrTailB64, res.StderrBytes),
		}
	}
	return stdout, nil
}

// wholeStdout returns the command's whole stdout: the result's when it was
// not truncated, else read back from the sidecar (up to MaxStdout), else
// the result's head and tail around a marker.
func wholeStdout(ctx context.Context, c API, req ExecRequest, res client.ExecResult) string {
	if !res.StdoutTruncated {
		return string(res.StdoutData())
	}
	if res.StdoutBytes <= MaxStdout && res.CommandID != "" {
		if rc, err := c.OpenOutput(ctx, req.Workspace, req.Session, res.CommandID, "stdout", 0, false); err == nil {
			b, err := io.ReadAll(io.LimitReader(rc, MaxStdout+1))
			rc.Close()
			if err == nil && int64(len(b)) == res.StdoutBytes {
				return string(b)
			}
		}
	}
	return joined(res.StdoutData(), true, res.StdoutTail, res.StdoutTailB64, res.StdoutBytes)
}

// joined is a stream's head and, when truncated, its tail around a marker.
func joined(head []byte, truncated bool, tail, tailB64 string, total int64) string {
	if !truncated {
		return string(head)
	}
	t := []byte(tail)
	if tailB64 != "" {
		if b, err := base64.StdEncoding.DecodeString(tailB64); err == nil {
			t = b
		}
	}
	omitted := total - int64(len(head)) - int64(len(t))
	sep := ""
	if len(head) > 0 && head[len(head)-1] != '\n' {
		sep = "\n"
	}
	return fmt.Sprintf("%s%s[... %d bytes omitted ...]\n%s", head, sep, omitted, t)
}
