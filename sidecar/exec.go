package sidecar

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/sidecar/client"
	"github.com/patina-dev/patina/worktree"
)

func (s *Service) handleExec(w http.ResponseWriter, r *http.Request) {
	var req client.ExecRequest
	if err := decode(w, r, &req, s.cfg.MaxBodyBytes, false); err != nil {
		writeError(w, err)
		return
	}
	sreq, err := execRequest(req)
	if err != nil {
		writeError(w, err)
		return
	}
	ws, sess, err := s.sessionFor(r, true)
	if err != nil {
		writeError(w, err)
		return
	}
	switch {
	case req.Async:
		id, err := sess.Start(r.Context(), sreq)
		if err != nil {
			writeError(w, ws.explain(err))
			return
		}
		go ws.logWhenDone(sess, id, req.Command)
		writeJSON(w, http.StatusAccepted, client.AsyncResult{CommandID: id})
	case strings.Contains(r.Header.Get("Accept"), "text/event-stream"):
		s.execStream(w, r, ws, sess, sreq, req.Command)
	default:
		res, err := sess.Exec(r.Context(), sreq)
		if err != nil && res.CommandID == "" {
			writeError(w, ws.explain(err))
			return
		}
		ws.logCommand(sess.ID(), req.Command, res)
		if err != nil {
			return // the client went away; the command was stopped
		}
		writeJSON(w, http.StatusOK, execResult(res, true))
	}
}

// execRequest converts and checks an API exec request.
func execRequest(req client.ExecRequest) (session.ExecRequest, error) {
	out := session.ExecRequest{Command: req.Command}
	if req.Command == "" {
		return out, fmt.Errorf("%w: command is required", errInvalid)
	}
	const maxTimeout = int64(time.Duration(math.MaxInt64) / time.Millisecond)
	if req.TimeoutMS < 0 || req.TimeoutMS > maxTimeout {
		return out, fmt.Errorf("%w: timeout_ms must be between 0 (none) and %d", errInvalid, maxTimeout)
	}
	out.Timeout = time.Duration(req.TimeoutMS) * time.Millisecond
	switch {
	case req.Stdin != nil && req.StdinBase64 != "":
		return out, fmt.Errorf("%w: give stdin or stdin_base64, not both", errInvalid)
	case req.Stdin != nil:
		out.Stdin = []byte(*req.Stdin)
	case req.StdinBase64 != "":
		b, err := base64.StdEncoding.DecodeString(req.StdinBase64)
		if err != nil {
			return out, fmt.Errorf("%w: stdin_base64: %v", errInvalid, err)
		}
		out.Stdin = b
	}
	return out, nil // the session refuses what else is wrong (a NUL byte: 400)
}

// execResult converts a session result; withOutput false leaves the output
// fields empty (it was streamed).
func execResult(res session.ExecResult, withOutput bool) client.ExecResult {
	out := client.ExecResult{
		CommandID:       res.CommandID,
		ExitCode:        res.ExitCode,
		StdoutBytes:     res.Stdout.Size,
		StderrBytes:     res.Stderr.Size,
		StdoutTruncated: res.Stdout.Truncated,
		StderrTruncated: res.Stderr.Truncated,
		TimedOut:        res.TimedOut,
		Interrupted:     res.Interrupted,
		SessionEnded:    res.Ended,
		ShellReplaced:   res.ShellReplaced,
		Notice:          res.Notice,
		Cwd:             res.Cwd,
		DurationMS:      float64(res.Duration().Microseconds()) / 1000,
	}
	if withOutput {
		out.Stdout, out.StdoutBase64 = textAndBase64(res.Stdout.Data)
		out.Stderr, out.StderrBase64 = textAndBase64(res.Stderr.Data)
		out.StdoutTail, out.StdoutTailB64 = textAndBase64(res.Stdout.Tail)
		out.StderrTail, out.StderrTailB64 = textAndBase64(res.Stderr.Tail)
	}
	return out
}

// textAndBase64 returns b as text, and also as base64 when it is not valid
// UTF-8 (the text then has U+FFFD for invalid bytes).
func textAndBase64(b []byte) (string, string) {
	if utf8.Valid(b) {
		return string(b), ""
	}
	return strings.ToValidUTF8(string(b), "\uFFFD"), base64.StdEncoding.EncodeToString(b)
}

// logCommand queues the command for the workspace's log.
func (w *workspace) logCommand(sid, text string, res session.ExecResult) {
	code := res.ExitCode
	ev := worktree.Event{Kind: worktree.EventCommand, Message: "[" + sid + "] " + text}
	if code >= 0 {
		ev.ExitCode = &code
	}
	if res.TimedOut {
		ev.Message += " (timed out)"
	}
	w.log.add(ev)
}

// logWhenDone logs an async command once it finishes.
func (w *workspace) logWhenDone(sess *session.Session, id, text string) {
	res, err := sess.Wait(context.Background(), id)
	if err == nil {
		w.logCommand(sess.ID(), text, res)
	}
}

// execStream runs a command and streams its output as server-sent events:
// "stdout" and "stderr" with {"data"|"data_base64", "offset"}, then "exit"
// with {"result"}. If the client goes away, the command is stopped.
func (s *Service) execStream(w http.ResponseWriter, r *http.Request, ws *workspace, sess *session.Session, req session.ExecRequest, text string) {
	fl, ok := w.(http.Flusher)
	if !ok {
		writeError(w, fmt.Errorf("streaming is not supported by this connection"))
		return
	}
	id, err := sess.Start(r.Context(), req)
	if err != nil {
		writeError(w, ws.explain(err))
		return
	}
	ctx := r.Context()
	type chunk struct {
		stream string
		data   []byte
		offset int64
	}
	chunks := make(chan chunk, 16)
	follow := func(stream session.Stream) {
		defer func() { chunks <- chunk{stream: string(stream)} }() // end marker
		rc, err := sess.Follow(ctx, id, stream, 0)
		if err != nil {
			return
		}
		defer rc.Close()
		var off int64
		buf := make([]byte, 64<<10)
		for {
			n, err := rc.Read(buf)
			if n > 0 {
				chunks <- chunk{stream: string(stream), data: append([]byte(nil), buf[:n]...), offset: off}
				off += int64(n)
			}
			if err != nil {
				return
			}
		}
	}
	go follow(session.Stdout)
	go follow(session.Stderr)

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Patina-Command-Id", id)
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	open := 2
	for open > 0 {
		c := <-chunks
		if c.data == nil {
			open--
			continue
		}
		ev := client.StreamEvent{Offset: c.offset}
		ev.Data, ev.DataBase64 = textAndBase64(c.data)
		writeEvent(w, c.stream, ev)
		fl.Flush()
	}
	if ctx.Err() != nil {
		// The client left: stop the command, as a plain exec would.
		_ = sess.Signal(context.Background(), id, syscall.SIGINT)
		go ws.logWhenDone(sess, id, text)
		return
	}
	res, err := sess.Wait(ctx, id)
	if err != nil {
		writeEvent(w, "error", client.StreamEvent{Data: err.Error()})
		fl.Flush()
		return
	}
	ws.logCommand(sess.ID(), text, res)
	r2 := execResult(res, false)
	writeEvent(w, "exit", client.StreamEvent{Result: &r2})
	fl.Flush()
}

func writeEvent(w io.Writer, event string, ev client.StreamEvent) {
	b, _ := json.Marshal(ev)
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
}
