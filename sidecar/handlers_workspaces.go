package sidecar

import (
	"fmt"
	"net/http"

	"github.com/patina-dev/patina/sidecar/client"
)

func (s *Service) handleCreateWorkspace(w http.ResponseWriter, r *http.Request) {
	var req client.CreateWorkspaceRequest
	if err := decode(w, r, &req, s.cfg.MaxBodyBytes, true); err != nil {
		writeError(w, err)
		return
	}
	ws, err := s.mgr.Create(r.Context(), createRequest(req))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, workspaceView(ws))
}

func (s *Service) handleForkWorkspace(w http.ResponseWriter, r *http.Request) {
	var req client.ForkWorkspaceRequest
	if err := decode(w, r, &req, s.cfg.MaxBodyBytes, true); err != nil {
		writeError(w, err)
		return
	}
	if req.Count > 1 {
		wss, err := s.mgr.Forks(r.Context(), r.PathValue("id"), forkRequest(req))
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusCreated, workspaceViews(wss))
		return
	}
	ws, err := s.mgr.Fork(r.Context(), r.PathValue("id"), forkRequest(req))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, workspaceView(ws))
}

func (s *Service) handleListWorkspaces(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, workspaceViews(s.mgr.List()))
}

func (s *Service) handleGetWorkspace(w http.ResponseWriter, r *http.Request) {
	ws, err := s.mgr.Get(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, workspaceView(ws))
}

func (s *Service) handleSetNetwork(w http.ResponseWriter, r *http.Request) {
	narrow, err := boolParam(r, "narrow")
	if err != nil {
		writeError(w, err)
		return
	}
	var req client.NetworkPolicy
	if err := decode(w, r, &req, s.cfg.MaxBodyBytes, false); err != nil {
		writeError(w, err)
		return
	}
	ws, err := s.mgr.SetNetwork(r.Context(), r.PathValue("id"), networkPolicy(req), narrow)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, workspaceView(ws))
}

func (s *Service) handleStopWorkspace(w http.ResponseWriter, r *http.Request) {
	ws, err := s.mgr.Stop(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, workspaceView(ws))
}

func (s *Service) handleStartWorkspace(w http.ResponseWriter, r *http.Request) {
	ws, err := s.mgr.Start(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, workspaceView(ws))
}

func (s *Service) handleDeleteWorkspace(w http.ResponseWriter, r *http.Request) {
	keep, err := boolParam(r, "keep_branch")
	if err != nil {
		writeError(w, err)
		return
	}
	if err := s.mgr.Delete(r.Context(), r.PathValue("id"), keep); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// boolParam reads a query parameter that is 1/true or 0/false (absent:
// false).
func boolParam(r *http.Request, name string) (bool, error) {
	switch v := r.URL.Query().Get(name); v {
	case "", "0", "false":
		return false, nil
	case "1", "true":
		return true, nil
	default:
		return false, fmt.Errorf("%w: %s must be 1 or 0, got %q", errInvalid, name, v)
	}
}
