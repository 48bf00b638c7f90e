package sidecar

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/patina-dev/patina/sidecar/client"
	"github.com/patina-dev/patina/sidecar/workspace"
)

func (s *Service) handleExec(w http.ResponseWriter, r *http.Request) {
	var req client.ExecRequest
	if err := decode(w, r, &req, s.cfg.MaxBodyBytes, false); err != nil {
		writeError(w, err)
		return
	}
	ereq, err := execRequest(req)
	if err != nil {
		writeError(w, err)
		return
	}
	id, sid := r.PathValue("id"), r.PathValue("sid")
	start := time.Now()
	switch {
	case req.Async:
		cid, _, err := s.mgr.StartCommand(r.Context(), id, sid, ereq)
		if err != nil {
			s.observeExec(start, err)
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusAccepted, client.AsyncResult{CommandID: cid})
	case strings.Contains(r.Header.Get("Accept"), "text/event-stream"):
		s.execStream(w, r, ereq)
	default:
		res, err := s.mgr.Exec(r.Context(), id, sid, ereq)
		defer res.Release()
		s.observeExec(start, err)
		if err != nil {
			if res.CommandID == "" {
				writeError(w, err)
			}
			return // the client went away; the command was stopped
		}
		writeExecAnswer(w, res)
	}
}

// execRequest converts and checks an API exec request.
func execRequest(req client.ExecRequest) (workspace.ExecRequest, error) {
	out := workspace.ExecRequest{Command: req.Command}
	const maxTimeout = int64(time.Duration(math.MaxInt64) / time.Millisecond)
	if req.TimeoutMS < 0 || req.TimeoutMS > maxTimeout {
		return out, fmt.Errorf("%w: timeout_ms must be a number of milliseconds from 1 to %d (about 292 years), or 0 for no limit; got %d", errInvalid, maxTimeout, req.TimeoutMS)
	}
	out.Timeout = time.Duration(req.TimeoutMS) * time.Millisecond
	switch {
	case req.TTY:
		out.TTY = &workspace.TTY{Rows: cmp.Or(req.Rows, 24), Cols: cmp.Or(req.Cols, 80), Term: cmp.Or(req.Term, defaultTerm)}
	case req.Rows != 0 || req.Cols != 0 || req.Term != "":
		return out, fmt.Errorf("%w: rows, cols and term go with \"tty\": true", errInvalid)
	}
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
	return out, out.Validate() // the domain's one check of an exec request
}

// execResult converts a command's result; withOutput false leaves the
// output fields empty (it was streamed).
func execResult(res workspace.ExecResult, withOutput bool) client.ExecResult {
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
		Resumed:         res.Resumed,
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

// execStream runs a command and streams its output as server-sent events:
// "stdout" and "stderr" with {"data"|"data_base64", "offset"}, then "exit"
// with {"result"}. If the client goes away, the command is stopped.
func (s *Service) execStream(w http.ResponseWriter, r *http.Request, req workspace.ExecRequest) {
	fl, ok := w.(http.Flusher)
	if !ok {
		writeError(w, fmt.Errorf("streaming is not supported by this connection"))
		return
	}
	id, sid := r.PathValue("id"), r.PathValue("sid")
	ctx := r.Context()
	start := time.Now()
	cid, resumed, err := s.mgr.StartCommand(ctx, id, sid, req)
	if err != nil {
		s.observeExec(start, err)
		writeError(w, err)
		return
	}
	type chunk struct {
		stream string
		data   []byte
		offset int64
		end    bool
	}
	chunks := make(chan chunk, 16)
	follow := func(stream string) {
		defer func() { chunks <- chunk{stream: stream, end: true} }()
		out, err := s.mgr.Output(ctx, id, workspace.OutputRequest{Session: sid, Command: cid, Stream: stream, Follow: true})
		if err != nil {
			return
		}
		defer out.Close()
		var off int64
		buf := make([]byte, 64<<10)
		for {
			n, err := out.Read(buf)
			if n > 0 {
				select {
				case chunks <- chunk{stream: stream, data: append([]byte(nil), buf[:n]...), offset: off}:
				case <-ctx.Done():
					return
				}
				off += int64(n)
			}
			if err != nil {
				return
			}
		}
	}
	go follow("stdout")
	go follow("stderr")

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Patina-Command-Id", cid)
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	for open := 2; open > 0; {
		c := <-chunks
		if c.end {
			open--
			continue
		}
		ev := client.StreamEvent{Offset: c.offset}
		ev.Data, ev.DataBase64 = textAndBase64(c.data)
		s.metrics.Streamed("output", len(c.data))
		writeEvent(w, c.stream, ev)
		fl.Flush()
	}
	if ctx.Err() != nil {
		// The client left: stop the command, as a plain exec would.
		_ = s.mgr.Signal(context.WithoutCancel(ctx), id, sid, cid, "INT")
		return
	}
	res, err := s.mgr.Wait(ctx, id, sid, cid)
	s.observeExec(start, err)
	if err != nil {
		writeEvent(w, "error", client.StreamEvent{Data: err.Error()})
		fl.Flush()
		return
	}
	r2 := execResult(res, false)
	r2.Resumed = resumed
	writeEvent(w, "exit", client.StreamEvent{Result: &r2})
	fl.Flush()
}

func writeEvent(w io.Writer, event string, ev client.StreamEvent) {
	b, _ := json.Marshal(ev)
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
}

// defaultTerm is TERM for a command on a terminal when the request names
// none: what terminals in use today are.
const defaultTerm = "xterm-256color"

// observeExec counts an exec in the metrics: its latency when it finished,
// its error code when it failed.
func (s *Service) observeExec(start time.Time, err error) {
	code := ""
	if err != nil {
		_, code = status(err)
	}
	s.metrics.Exec(code, time.Since(start))
}
