package sidecar

import (
	"fmt"
	"net/http"

	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/sidecar/client"
)

func sessionView(inf session.Info) client.Session {
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
	}
}

func (s *Service) handleCreateSession(w http.ResponseWriter, r *http.Request) {
	ws, err := s.lookup(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	var req client.CreateSessionRequest
	if err := decode(w, r, &req, s.cfg.MaxBodyBytes, true); err != nil {
		writeError(w, err)
		return
	}
	if req.Cwd == "" {
		req.Cwd = workdir
	}
	m, err := ws.manager()
	if err != nil {
		writeError(w, err)
		return
	}
	sess, err := m.Create(r.Context(), session.CreateRequest{ID: req.ID, Cwd: req.Cwd, Env: req.Env})
	if err != nil {
		writeError(w, ws.explain(err))
		return
	}
	writeJSON(w, http.StatusCreated, sessionView(sess.Info()))
}

// historyManagerFor resolves {id} to its session manager, running or not.
func (s *Service) historyManagerFor(r *http.Request) (*session.Manager, error) {
	ws, err := s.lookup(r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return ws.historyManager()
}

func (s *Service) handleListSessions(w http.ResponseWriter, r *http.Request) {
	m, err := s.historyManagerFor(r)
	if err != nil {
		writeError(w, err)
		return
	}
	out := []client.Session{}
	for _, inf := range m.List() {
		out = append(out, sessionView(inf))
	}
	writeJSON(w, http.StatusOK, out)
}

// sessionFor resolves {id}/{sid}; forExec creates "default" on first use
// and requires a running workspace.
func (s *Service) sessionFor(r *http.Request, forExec bool) (*workspace, *session.Session, error) {
	ws, err := s.lookup(r.PathValue("id"))
	if err != nil {
		return nil, nil, err
	}
	sid := r.PathValue("sid")
	if err := session.ValidateID(sid); err != nil {
		return nil, nil, err
	}
	sess, err := ws.session(r.Context(), sid, forExec)
	if err != nil {
		return nil, nil, err
	}
	return ws, sess, nil
}

func (s *Service) handleGetSession(w http.ResponseWriter, r *http.Request) {
	_, sess, err := s.sessionFor(r, false)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sessionView(sess.Info()))
}

func (s *Service) handleDeleteSession(w http.ResponseWriter, r *http.Request) {
	m, err := s.historyManagerFor(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if err := m.Remove(r.Context(), r.PathValue("sid")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Service) handleSetEnv(w http.ResponseWriter, r *http.Request) {
	var req client.SetEnvRequest
	if err := decode(w, r, &req, s.cfg.MaxBodyBytes, false); err != nil {
		writeError(w, err)
		return
	}
	if len(req.Env) == 0 && len(req.Unset) == 0 {
		writeError(w, fmt.Errorf("%w: env (or unset) is required", errInvalid))
		return
	}
	ws, sess, err := s.sessionFor(r, true)
	if err != nil {
		writeError(w, err)
		return
	}
	if err := sess.SetEnv(r.Context(), req.Env, req.Unset); err != nil {
		writeError(w, ws.explain(err))
		return
	}
	writeJSON(w, http.StatusOK, sessionView(sess.Info()))
}
