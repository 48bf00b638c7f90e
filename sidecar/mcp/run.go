package mcpserver

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/patina-dev/patina/sidecar/client"
)

// defaultSession is the session run uses unless told.
const defaultSession = client.DefaultSession

func (s *server) addRunTools(ms *mcp.Server) {
	addTool(s, ms, &mcp.Tool{
		Name:  "run",
		Title: "Run a shell command",
		Description: "Run a bash command in a workspace's persistent shell session and wait for it. " +
			"State persists between calls in the same session: cd, exported variables, functions, aliases, background jobs. " +
			"A new session starts in /workspace. Avoid `exit N` and `set -e` in the session itself: exit ends the session's shell, losing its state, and so does any failing command after set -e; use `(exit N)` or `false` to fail, and set -e only inside `( ... )` or `bash -c`. stdin is empty (reads get end-of-file), so use non-interactive options (apt-get -y, git --no-pager, ...). " +
			"Returns the exit code, stdout, stderr and the shell's working directory afterwards. " +
			"Long output is cut to its head and tail; the marker between them says how to read the rest with command_output. " +
			"A command running past timeout_ms (default 10 minutes) is interrupted; the session keeps its state. " +
			"For servers and long jobs pass background=true: you get a command_id at once; follow it with command_output and stop it with command_signal. " +
			"A session runs one command at a time: pass another session name to run something meanwhile.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(true)},
	}, s.run)
	addTool(s, ms, &mcp.Tool{
		Name:  "command_output",
		Title: "Read a command's output",
		Description: "Read a command's stdout or stderr from a byte offset: the rest of output run cut short, or the output of a command started with background=true. " +
			"Also reports whether the command is still running and its exit code. " +
			"Pass command_id exactly as run returned it (\"3\", or \"build:3\" for a command of session build: the id names its session). " +
			"Pass next_offset from the answer to read on; with wait_ms, it first waits (up to that long) for a running command to finish.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)},
	}, s.commandOutput)
	addTool(s, ms, &mcp.Tool{
		Name:  "command_signal",
		Title: "Signal a running command",
		Description: "Send a signal to a running command (one started with background=true, or a run in another session): " +
			"INT to interrupt it like Ctrl-C, TERM to ask it to stop, KILL to force it. The session's shell survives. " +
			"Pass command_id exactly as run returned it (\"build:3\" names session build). " +
			"Reports whether the command ended shortly after.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)},
	}, s.commandSignal)
}

func (s *server) run(ctx context.Context, in RunIn) (string, RunOut, error) {
	switch {
	case in.Workspace == "":
		return "", RunOut{}, required("workspace", "", "the workspace's name or id (from workspace_create or workspace_list)")
	case strings.TrimSpace(in.Command) == "":
		return "", RunOut{}, required("command", "", "the bash command line to run")
	case in.TimeoutMS < 0:
		return "", RunOut{}, argErrorf("timeout_ms must not be negative, got %d", in.TimeoutMS)
	}
	sid := firstNonEmpty(in.Session, defaultSession)
	req := client.ExecRequest{Command: in.Command, TimeoutMS: in.TimeoutMS}
	if in.Stdin != "" {
		req.Stdin = &in.Stdin
	}
	out := RunOut{Workspace: in.Workspace, Session: sid}

	if in.Background {
		cctx, cancel := s.callCtx(ctx)
		defer cancel()
		fresh, err := s.inSession(cctx, in.Workspace, sid, func(c *client.Client) (err error) {
			out.CommandID, err = c.Start(cctx, in.Workspace, sid, req)
			return err
		})
		if err != nil {
			return "", RunOut{}, err
		}
		out.Background = true
		out.CommandID = qualifyID(sid, out.CommandID)
		text := fmt.Sprintf("Started command %s in the background (session %q).\n"+
			"Read its output and status: command_output(workspace=%q, command_id=%q, stream=\"stdout\") and the same with stream=\"stderr\"; add wait_ms to wait for it to finish.\n"+
			"Stop it: command_signal(workspace=%q, command_id=%q, signal=\"INT\").\n"+
			"The session is busy until it ends: run other commands in another session.",
			out.CommandID, sid, in.Workspace, out.CommandID, in.Workspace, out.CommandID)
		if fresh {
			text += "\n" + freshNote(sid)
		}
		return text, out, nil
	}

	if req.TimeoutMS == 0 {
		req.TimeoutMS = s.opts.RunTimeout.Milliseconds()
	}
	var res client.ExecResult
	fresh, err := s.inSession(ctx, in.Workspace, sid, func(c *client.Client) (err error) {
		res, err = c.Exec(ctx, in.Workspace, sid, req)
		return err
	})
	if err != nil {
		return "", RunOut{}, err
	}
	text, out, err := s.runResult(in.Workspace, sid, req.TimeoutMS, res)
	if fresh {
		text = freshNote(sid) + "\n" + text
	}
	return text, out, err
}

// inSession runs exec, which runs a command in session sid, making the
// session usable first when it has to: the sidecar creates only "default"
// on first use, so another session is created when exec finds none; and
// a session whose shell has exited (`exit`, `exec`, a fatal signal) is
// started again (its history and command ids go on), so that one stray `exit` does not leave a
// model with a dead session name. fresh reports the latter.
func (s *server) inSession(ctx context.Context, ws, sid string, exec func(*client.Client) error) (fresh bool, err error) {
	err = client.InSession(ctx, sessionCaller{s}, client.SessionCall{
		Workspace: ws, Session: sid, Restart: true,
		OnRestart: func() {
			s.log.Info("session ended: started it again", "workspace", ws, "session_id", sid)
			fresh = true
		},
	}, func() error { return s.call(ctx, exec) })
	return fresh, err
}

// sessionCaller makes the session calls of client.InSession through
// s.call (which finds the sidecar again if it went away).
type sessionCaller struct{ s *server }

func (sc sessionCaller) CreateSession(ctx context.Context, ws string, req client.CreateSessionRequest) (out client.Session, err error) {
	err = sc.s.call(ctx, func(c *client.Client) (err error) {
		out, err = c.CreateSession(ctx, ws, req)
		return err
	})
	return out, err
}

func (sc sessionCaller) DeleteSession(ctx context.Context, ws, sid string) error {
	return sc.s.call(ctx, func(c *client.Client) error { return c.DeleteSession(ctx, ws, sid) })
}

func (sc sessionCaller) RestartSession(ctx context.Context, ws, sid string) (out client.Session, err error) {
	err = sc.s.call(ctx, func(c *client.Client) (err error) {
		out, err = c.RestartSession(ctx, ws, sid)
		return err
	})
	return out, err
}

// freshNote says that a session was started again.
func freshNote(sid string) string {
	return fmt.Sprintf("Note: session %q's shell had exited, so this command ran in a new shell: it starts in /workspace, "+
		"and its variables and functions are gone (its command history goes on).", sid)
}

// runResult shapes an exec result for the model.
func (s *server) runResult(ws, sid string, timeoutMS int64, res client.ExecResult) (string, RunOut, error) {
	code := res.ExitCode
	cid := qualifyID(sid, res.CommandID)
	out := RunOut{
		Workspace: ws, Session: sid, CommandID: cid, ExitCode: &code,
		StdoutBytes: res.StdoutBytes, StderrBytes: res.StderrBytes,
		Cwd: res.Cwd, TimedOut: res.TimedOut, Interrupted: res.Interrupted,
		SessionEnded: res.SessionEnded, Notice: res.Notice, DurationMS: int64(res.DurationMS),
	}
	more := func(stream string) func(int64) string {
		return func(off int64) string {
			return fmt.Sprintf("read them with command_output(workspace=%q, command_id=%q, stream=%q, offset=%d)",
				ws, cid, stream, off)
		}
	}
	var notes []string
	stdout, so, badOut := s.streamText(res.StdoutData(), tailData(res.StdoutTail, res.StdoutTailB64), res.StdoutBytes, res.StdoutTruncated, more("stdout"))
	stderr, se, badErr := s.streamText(res.StderrData(), tailData(res.StderrTail, res.StderrTailB64), res.StderrBytes, res.StderrTruncated, more("stderr"))
	out.Stdout, out.StdoutOmitted, out.Stderr, out.StderrOmitted = stdout, so, stderr, se
	for _, bad := range []struct {
		stream string
		is     bool
	}{{"stdout", badOut}, {"stderr", badErr}} {
		if bad.is {
			notes = append(notes, fmt.Sprintf("%s is not valid UTF-8 (binary output?): invalid bytes are shown as \uFFFD; "+
				"command_output(workspace=%q, command_id=%q, stream=%q, encoding=\"base64\") returns the exact bytes.",
				bad.stream, ws, cid, bad.stream))
		}
	}
	if res.TimedOut {
		kept := "; the session kept its state"
		if res.SessionEnded {
			kept = ""
		}
		notes = append(notes, fmt.Sprintf("The command ran longer than timeout_ms=%d and was interrupted%s. "+
			"For long jobs use a larger timeout_ms or background=true.", timeoutMS, kept))
	} else if res.Interrupted {
		notes = append(notes, "The command was interrupted by a signal.")
	}
	if res.SessionEnded {
		notes = append(notes, fmt.Sprintf("The session's shell exited (`exit`, `exec` or a fatal signal): its state is gone, "+
			"and the next run in session %q starts a new shell in /workspace. To fail a command without ending the shell, use `(exit N)` or `false`, not `exit N`.", sid))
	}
	if res.Notice != "" {
		notes = append(notes, res.Notice)
	}

	var b strings.Builder
	fmt.Fprintf(&b, "exit code %d", res.ExitCode)
	if res.Cwd != "" {
		fmt.Fprintf(&b, " | cwd %s", res.Cwd)
	}
	fmt.Fprintf(&b, " | %s | command_id %s\n", formatDuration(res.DurationMS), cid)
	section := func(name, text string) {
		if text == "" {
			return
		}
		fmt.Fprintf(&b, "--- %s ---\n%s", name, text)
		if !strings.HasSuffix(text, "\n") {
			b.WriteString("\n[no newline at end]\n")
		}
	}
	section("stdout", stdout)
	section("stderr", stderr)
	if stdout == "" && stderr == "" {
		b.WriteString("(no output)\n")
	}
	for _, n := range notes {
		b.WriteString("Note: " + n + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n"), out, nil
}

// streamText cuts one stream to the configured head and tail. prefix is
// the sidecar's head of the stream, suffix its tail when it truncated.
func (s *server) streamText(prefix, suffix []byte, total int64, truncated bool, more func(int64) string) (string, int64, bool) {
	if !truncated {
		total, suffix = int64(len(prefix)), nil
	}
	e := cutOutput(prefix, suffix, total, s.opts.OutputHead, s.opts.OutputTail)
	text, bad := e.render(more)
	return text, e.Omitted(), bad
}

// tailData decodes an exec result's tail.
func tailData(text, b64 string) []byte {
	if b64 != "" {
		if b, err := base64.StdEncoding.DecodeString(b64); err == nil {
			return b
		}
	}
	return []byte(text)
}

func formatDuration(ms float64) string {
	d := time.Duration(ms * float64(time.Millisecond))
	switch {
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return d.Round(time.Second).String()
}

func (s *server) commandOutput(ctx context.Context, in CommandOutputIn) (string, CommandOutputOut, error) {
	sid, num, err := commandArgs(in.Workspace, in.CommandID, in.Session)
	if err != nil {
		return "", CommandOutputOut{}, err
	}
	switch {
	case in.Stream != "stdout" && in.Stream != "stderr":
		return "", CommandOutputOut{}, argErrorf("stream must be \"stdout\" or \"stderr\", got %q", in.Stream)
	case in.Offset < 0:
		return "", CommandOutputOut{}, argErrorf("offset must not be negative, got %d", in.Offset)
	case in.MaxBytes < 0:
		return "", CommandOutputOut{}, argErrorf("max_bytes must not be negative, got %d", in.MaxBytes)
	case in.WaitMS < 0:
		return "", CommandOutputOut{}, argErrorf("wait_ms must not be negative, got %d", in.WaitMS)
	case in.Encoding != "" && in.Encoding != "text" && in.Encoding != "base64":
		return "", CommandOutputOut{}, argErrorf("encoding must be \"text\" or \"base64\", got %q", in.Encoding)
	}
	cid := qualifyID(sid, num)
	limit := in.MaxBytes
	if limit == 0 {
		limit = s.opts.ReadChunk
	}
	limit = min(limit, s.opts.MaxReadChunk)
	enc := firstNonEmpty(in.Encoding, "text")

	if in.WaitMS > 0 {
		wctx, cancel := context.WithTimeout(ctx, time.Duration(in.WaitMS)*time.Millisecond)
		err := s.call(wctx, func(c *client.Client) error {
			_, err := c.Wait(wctx, in.Workspace, sid, num)
			return err
		})
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return "", CommandOutputOut{}, err
		}
	}
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	var cmd client.Command
	err = s.call(cctx, func(c *client.Client) (err error) {
		cmd, err = c.GetCommand(cctx, in.Workspace, sid, num)
		return err
	})
	if err != nil {
		return "", CommandOutputOut{}, err
	}
	total := cmd.StdoutBytes
	if in.Stream == "stderr" {
		total = cmd.StderrBytes
	}
	var data []byte
	// The sidecar refuses an offset past the end of a finished stream:
	// such a read has nothing to read.
	if cmd.State == "running" || in.Offset <= total {
		err = s.call(cctx, func(c *client.Client) error {
			rc, err := c.OpenOutput(cctx, in.Workspace, sid, num, in.Stream, in.Offset, false)
			if err != nil {
				return err
			}
			defer rc.Close()
			data, err = io.ReadAll(io.LimitReader(rc, int64(limit)))
			return err
		})
		if err != nil {
			return "", CommandOutputOut{}, err
		}
	}
	if enc == "text" && len(data) == limit {
		data = cutRuneEnd(data) // the next read starts at a whole character
	}
	next := in.Offset + int64(len(data))
	// An offset past the end reads nothing; the next read starts at the end.
	pastEnd := len(data) == 0 && in.Offset > total
	if pastEnd {
		next = total
	}
	out := CommandOutputOut{
		CommandID: cid, Stream: in.Stream, State: cmd.State, ExitCode: cmd.ExitCode,
		Offset: in.Offset, NextOffset: next, TotalBytes: max(total, next),
		EOF: cmd.State != "running" && next >= total, Encoding: enc,
		StdoutBytes: cmd.StdoutBytes, StderrBytes: cmd.StderrBytes,
	}
	var bad bool
	if enc == "base64" {
		out.Data = base64.StdEncoding.EncodeToString(data)
	} else {
		out.Data, bad = asText(data)
	}

	var b strings.Builder
	fmt.Fprintf(&b, "%s of command %s (%s", in.Stream, cid, commandState(cmd))
	if pastEnd {
		soFar := ""
		if cmd.State == "running" {
			soFar = " so far"
		}
		fmt.Fprintf(&b, "): offset %d is past the end: %s has %d byte%s%s", in.Offset, in.Stream, total, plural(int(total)), soFar)
	} else {
		fmt.Fprintf(&b, "): bytes %d to %d of %d", in.Offset, next, out.TotalBytes)
	}
	if enc == "base64" {
		b.WriteString(", base64")
	}
	b.WriteString("\n")
	if cmd.OutputPruned {
		b.WriteString("Note: the sidecar has pruned this command's output (it keeps only recent commands').\n")
	}
	b.WriteString(out.Data)
	if len(data) > 0 && !strings.HasSuffix(out.Data, "\n") {
		b.WriteString("\n")
	}
	switch {
	case next < out.TotalBytes:
		fmt.Fprintf(&b, "[%d more bytes: command_output(..., offset=%d)]", out.TotalBytes-next, next)
	case cmd.State == "running":
		fmt.Fprintf(&b, "[the command is still running: call again with offset=%d for new output, with wait_ms to wait for it]", next)
	case pastEnd && total > 0:
		fmt.Fprintf(&b, "[end of output: pass an offset below %d to read it, e.g. offset=0]", total)
	default:
		b.WriteString("[end of output]")
	}
	if bad {
		b.WriteString("\nNote: the output is not valid UTF-8: invalid bytes are shown as \uFFFD; encoding=\"base64\" returns the exact bytes.")
	}
	return b.String(), out, nil
}

// commandState says how a command stands, for a model.
func commandState(cmd client.Command) string {
	switch {
	case cmd.State == "running":
		return "still running"
	case cmd.ExitCode != nil:
		s := fmt.Sprintf("%s, exit code %d", cmd.State, *cmd.ExitCode)
		if cmd.TimedOut {
			s += ", timed out"
		} else if cmd.Interrupted {
			s += ", interrupted"
		}
		return s
	}
	return cmd.State
}

// commandArgs checks command_output's and command_signal's workspace,
// command_id and session, and returns the session and the sidecar's id
// of the command.
func commandArgs(ws, id, session string) (sid, num string, err error) {
	if err := required("workspace", ws, "the workspace's name or id"); err != nil {
		return "", "", err
	}
	if err := required("command_id", id, "the command's id, from run"); err != nil {
		return "", "", err
	}
	return commandRef(id, session)
}

// commandIDSep joins a session and the sidecar's number of a command in
// the command ids a model sees: "build:3" is command 3 of session build.
// The sidecar numbers commands per session, so a bare "3" alone would
// name a different command in each session. Session ids cannot hold the
// separator (session.ValidateID: A-Z a-z 0-9 . _ -).
const commandIDSep = ":"

// qualifyID is the id a model sees for command num of session sid: num
// itself in the default session, "sid:num" in any other.
func qualifyID(sid, num string) string {
	if sid == defaultSession {
		return num
	}
	return sid + commandIDSep + num
}

// commandRef resolves a command_id and the optional session argument to a
// session and the sidecar's id of the command. A qualified id ("build:3")
// names its session, and a session argument naming another is an error; a
// bare id ("3") is in session, by default "default".
func commandRef(id, session string) (sid, num string, err error) {
	sess, num, qualified := strings.Cut(id, commandIDSep)
	if !qualified {
		return firstNonEmpty(session, defaultSession), id, nil
	}
	switch {
	case sess == "":
		return "", "", argErrorf("command_id %q has no session before %q: pass the command_id run returned", id, commandIDSep)
	case num == "":
		return "", "", argErrorf("command_id %q has no command number after %q: pass the command_id run returned", id, commandIDSep)
	case session != "" && session != sess:
		return "", "", argErrorf("command_id %q is a command of session %q, but session is %q: leave session out, the command_id names its session", id, sess, session)
	}
	return sess, num, nil
}

// normalizeSignal accepts "int", "SIGINT", "Int", ...
func normalizeSignal(sig string) (string, error) {
	if name, ok := client.SignalName(sig); ok {
		return name, nil
	}
	return "", argErrorf("signal must be one of %s; got %q", strings.Join(client.Signals, ", "), sig)
}

func (s *server) commandSignal(ctx context.Context, in CommandSignalIn) (string, CommandSignalOut, error) {
	sid, num, err := commandArgs(in.Workspace, in.CommandID, in.Session)
	if err != nil {
		return "", CommandSignalOut{}, err
	}
	sig, err := normalizeSignal(in.Signal)
	if err != nil {
		return "", CommandSignalOut{}, err
	}
	cid := qualifyID(sid, num)
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	err = s.call(cctx, func(c *client.Client) error {
		return c.Signal(cctx, in.Workspace, sid, num, sig)
	})
	if err != nil {
		return "", CommandSignalOut{}, err
	}
	wctx, wcancel := context.WithTimeout(ctx, s.opts.SignalWait)
	var cmd client.Command
	err = s.call(wctx, func(c *client.Client) (err error) {
		cmd, err = c.Wait(wctx, in.Workspace, sid, num)
		return err
	})
	wcancel()
	if errors.Is(err, context.DeadlineExceeded) {
		err = s.call(cctx, func(c *client.Client) (err error) {
			cmd, err = c.GetCommand(cctx, in.Workspace, sid, num)
			return err
		})
	}
	if err != nil {
		return "", CommandSignalOut{}, err
	}
	out := CommandSignalOut{CommandID: cid, Signal: sig, State: cmd.State, ExitCode: cmd.ExitCode}
	text := fmt.Sprintf("Sent %s to command %s; it is now %s.", sig, cid, commandState(cmd))
	if cmd.State == "running" {
		text += " Check again with command_output(wait_ms=...), or send TERM or KILL."
	}
	return text, out, nil
}
