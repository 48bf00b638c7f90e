package sidecar

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/patina-dev/patina/sidecar/client"
)

func (s *Service) handleForwardPort(w http.ResponseWriter, r *http.Request) {
	var req client.ForwardPortRequest
	if err := decode(w, r, &req, s.cfg.MaxBodyBytes, false); err != nil {
		writeError(w, err)
		return
	}
	p, created, err := s.mgr.ForwardPort(r.Context(), r.PathValue("id"), forwardPortRequest(req))
	if err != nil {
		writeError(w, err)
		return
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	writeJSON(w, code, portView(p))
}

func (s *Service) handleListPorts(w http.ResponseWriter, r *http.Request) {
	ports, err := s.mgr.Ports(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, client.PortList{Ports: portViews(ports)})
}

// handleClosePort serves DELETE …/ports/{port}, and DELETE …/ports with
// the port as ?port=N or as the body {"port": N}.
func (s *Service) handleClosePort(w http.ResponseWriter, r *http.Request) {
	raw := r.PathValue("port")
	if raw == "" {
		raw = r.URL.Query().Get("port")
	}
	var port int
	if raw == "" {
		var req client.ForwardPortRequest
		if err := decode(w, r, &req, s.cfg.MaxBodyBytes, false); err != nil {
			writeError(w, err)
			return
		}
		port = req.Port
	} else {
		p, err := strconv.Atoi(raw)
		if err != nil {
			writeError(w, fmt.Errorf("%w: port must be a number, got %q", errInvalid, raw))
			return
		}
		port = p
	}
	if err := s.mgr.ClosePort(r.Context(), r.PathValue("id"), port); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
