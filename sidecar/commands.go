package sidecar

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path"
	"strconv"
	"strings"
	"syscall"

	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/sidecar/client"
)

func commandView(ci session.CommandInfo) client.Command {
	return client.Command{
		ID:            ci.ID,
		Command:       ci.Command,
		State:         string(ci.State),
		StartedAt:     ci.StartedAt,
		EndedAt:       ci.EndedAt,
		ExitCode:      ci.ExitCode,
		StdoutBytes:   ci.StdoutBytes,
		StderrBytes:   ci.StderrBytes,
		TimedOut:      ci.TimedOut,
		Interrupted:   ci.Interrupted,
		SessionEnded:  ci.Ended,
		ShellReplaced: ci.Replaced,
		OutputPruned:  ci.OutputPruned,
	}
}

func (s *Service) handleHistory(w http.ResponseWriter, r *http.Request) {
	_, sess, err := s.sessionFor(r, false)
	if err != nil {
		writeError(w, err)
		return
	}
	out := []client.Command{}
	for _, ci := range sess.History() {
		out = append(out, commandView(ci))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Service) handleGetCommand(w http.ResponseWriter, r *http.Request) {
	_, sess, err := s.sessionFor(r, false)
	if err != nil {
		writeError(w, err)
		return
	}
	ci, err := sess.Command(r.PathValue("cid"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, commandView(ci))
}

// handleOutput serves a command's stdout or stderr from ?offset=N as raw
// bytes; with follow=1 it streams until the command finishes.
func (s *Service) handleOutput(w http.ResponseWriter, r *http.Request) {
	stream := session.Stream(path.Base(r.URL.Path))
	q := r.URL.Query()
	var offset int64
	if v := q.Get("offset"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, fmt.Errorf("%w: offset must be a byte offset ≥ 0, got %q", errInvalid, v))
			return
		}
		offset = n
	}
	follow := false
	switch v := q.Get("follow"); v {
	case "", "0", "false":
	case "1", "true":
		follow = true
	default:
		writeError(w, fmt.Errorf("%w: follow must be 1 or 0, got %q", errInvalid, v))
		return
	}
	_, sess, err := s.sessionFor(r, false)
	if err != nil {
		writeError(w, err)
		return
	}
	cid := r.PathValue("cid")
	if !follow {
		// Everything from offset to the current end, in chunks.
		first, err := sess.ReadOutput(cid, stream, offset, 1<<20)
		if err != nil {
			writeError(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(first)
		for off := offset + int64(len(first)); len(first) > 0; off += int64(len(first)) {
			if first, err = sess.ReadOutput(cid, stream, off, 1<<20); err != nil {
				return
			}
			if _, err := w.Write(first); err != nil {
				return
			}
		}
		return
	}
	rc, err := sess.Follow(r.Context(), cid, stream, offset)
	if err != nil {
		writeError(w, err)
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	buf := make([]byte, 64<<10)
	for {
		n, err := rc.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if fl != nil {
				fl.Flush()
			}
		}
		if err == io.EOF || err != nil {
			return
		}
	}
}

var signals = map[string]syscall.Signal{
	"INT": syscall.SIGINT, "TERM": syscall.SIGTERM, "KILL": syscall.SIGKILL,
	"HUP": syscall.SIGHUP, "QUIT": syscall.SIGQUIT, "USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2,
}

func (s *Service) handleSignal(w http.ResponseWriter, r *http.Request) {
	var req client.SignalRequest
	if err := decode(w, r, &req, s.cfg.MaxBodyBytes, false); err != nil {
		writeError(w, err)
		return
	}
	sig, ok := signals[strings.TrimPrefix(strings.ToUpper(req.Signal), "SIG")]
	if !ok {
		writeError(w, fmt.Errorf("%w: signal must be one of INT, TERM, KILL, HUP, QUIT, USR1, USR2; got %q", errInvalid, req.Signal))
		return
	}
	ws, sess, err := s.sessionFor(r, false)
	if err != nil {
		writeError(w, err)
		return
	}
	if err := sess.Signal(context.WithoutCancel(r.Context()), r.PathValue("cid"), sig); err != nil {
		writeError(w, ws.explain(err))
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"status": "signalled"})
}
