package sidecar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path"
	"strconv"

	"github.com/patina-dev/patina/sidecar/client"
	"github.com/patina-dev/patina/sidecar/workspace"
)

func sessionView(inf workspace.SessionInfo) client.Session {
	return client.Session{
		ID:           inf.ID,
		Cwd:          inf.Cwd,
		Status:       string(inf.State),
		CreatedAt:    inf.CreatedAt,
		Running:      inf.Running,
		Commands:     inf.Commands,
		ExitCode:     inf.ExitCode,
		EndReason:    inf.EndReason,
		Replacements: inf.Replacements,
		Terminal:     inf.Terminal,
	}
}

func commandView(ci workspace.CommandInfo) client.Command {
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

func (s *Service) handleCreateSession(w http.ResponseWriter, r *http.Request) {
	var req client.CreateSessionRequest
	if err := decode(w, r, &req, s.cfg.MaxBodyBytes, true); err != nil {
		writeError(w, err)
		return
	}
	inf, err := s.mgr.CreateSession(r.Context(), r.PathValue("id"), workspace.CreateSessionRequest{ID: req.ID, Cwd: req.Cwd, Env: req.Env})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, sessionView(inf))
}

func (s *Service) handleListSessions(w http.ResponseWriter, r *http.Request) {
	infos, err := s.mgr.Sessions(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]client.Session, 0, len(infos))
	for _, inf := range infos {
		out = append(out, sessionView(inf))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Service) handleGetSession(w http.ResponseWriter, r *http.Request) {
	inf, err := s.mgr.Session(r.Context(), r.PathValue("id"), r.PathValue("sid"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sessionView(inf))
}

func (s *Service) handleDeleteSession(w http.ResponseWriter, r *http.Request) {
	if err := s.mgr.RemoveSession(r.Context(), r.PathValue("id"), r.PathValue("sid")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Service) handleRestartSession(w http.ResponseWriter, r *http.Request) {
	inf, err := s.mgr.RestartSession(r.Context(), r.PathValue("id"), r.PathValue("sid"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sessionView(inf))
}

func (s *Service) handleSetEnv(w http.ResponseWriter, r *http.Request) {
	var req client.SetEnvRequest
	if err := decode(w, r, &req, s.cfg.MaxBodyBytes, false); err != nil {
		writeError(w, err)
		return
	}
	inf, err := s.mgr.SetEnv(r.Context(), r.PathValue("id"), r.PathValue("sid"), req.Env, req.Unset)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sessionView(inf))
}

// handleHistory streams the session's commands as one JSON array, a page
// at a time: a long history never sits whole in memory.
func (s *Service) handleHistory(w http.ResponseWriter, r *http.Request) {
	first, started := true, false
	err := s.mgr.History(r.Context(), r.PathValue("id"), r.PathValue("sid"), func(page []workspace.CommandInfo) error {
		if !started {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, "[")
			started = true
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		for _, ci := range page {
			if !first {
				buf.WriteByte(',')
			}
			first = false
			if err := enc.Encode(commandView(ci)); err != nil {
				return err
			}
		}
		_, err := w.Write(buf.Bytes())
		return err
	})
	switch {
	case err != nil && !started:
		writeError(w, err)
	case !started:
		writeJSON(w, http.StatusOK, []client.Command{})
	default:
		_, _ = io.WriteString(w, "]\n")
	}
}

func (s *Service) handleGetCommand(w http.ResponseWriter, r *http.Request) {
	ci, err := s.mgr.Command(r.Context(), r.PathValue("id"), r.PathValue("sid"), r.PathValue("cid"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, commandView(ci))
}

// handleOutput serves a command's stdout or stderr from ?offset=N as raw
// bytes; with follow=1 it streams until the command finishes.
func (s *Service) handleOutput(w http.ResponseWriter, r *http.Request) {
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
	follow, err := boolParam(r, "follow")
	if err != nil {
		writeError(w, err)
		return
	}
	out, err := s.mgr.Output(r.Context(), r.PathValue("id"), workspace.OutputRequest{
		Session: r.PathValue("sid"), Command: r.PathValue("cid"), Stream: path.Base(r.URL.Path), Offset: offset, Follow: follow,
	})
	if err != nil {
		writeError(w, err)
		return
	}
	defer out.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	s.metrics.Streamed("output", int(copyFlushing(w, out)))
}

// copyFlushing copies r to w, flushing each chunk (live output), and
// says how many bytes it wrote.
func copyFlushing(w http.ResponseWriter, r io.Reader) (written int64) {
	fl, _ := w.(http.Flusher)
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return written
			}
			written += int64(n)
			if fl != nil {
				fl.Flush()
			}
		}
		if err != nil {
			return written
		}
	}
}

func (s *Service) handleSignal(w http.ResponseWriter, r *http.Request) {
	var req client.SignalRequest
	if err := decode(w, r, &req, s.cfg.MaxBodyBytes, false); err != nil {
		writeError(w, err)
		return
	}
	if err := s.mgr.Signal(r.Context(), r.PathValue("id"), r.PathValue("sid"), r.PathValue("cid"), req.Signal); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"status": "signalled"})
}
