package sidecar

import (
	"net/http"

	"github.com/patina-dev/patina/sidecar/client"
	"github.com/patina-dev/patina/sidecar/secrets"
)

// A secret's value comes in once, in PUT's body, and never goes out: no
// answer holds it, and the request is not logged.

func (s *Service) handleSetSecret(w http.ResponseWriter, r *http.Request) {
	var req client.SetSecretRequest
	if err := decode(w, r, &req, s.cfg.MaxBodyBytes, false); err != nil {
		writeError(w, err)
		return
	}
	hosts := req.Hosts
	if req.Host != "" {
		hosts = append([]string{req.Host}, hosts...)
	}
	info, err := s.vault.Set(secrets.SetRequest{Name: r.PathValue("name"), Hosts: hosts, Header: req.Header})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, secretView(info))
}

func (s *Service) handleListSecrets(w http.ResponseWriter, r *http.Request) {
	out := client.SecretList{Secrets: []client.Secret{}}
	for _, info := range s.vault.List() {
		out.Secrets = append(out.Secrets, secretView(info))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Service) handleGetSecret(w http.ResponseWriter, r *http.Request) {
	info, err := s.vault.Get(r.PathValue("name"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, secretView(info))
}

func (s *Service) handleDeleteSecret(w http.ResponseWriter, r *http.Request) {
	if err := s.vault.Delete(r.PathValue("name")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func secretView(i secrets.Info) client.Secret {
	return client.Secret{Name: i.Name, Hosts: i.Hosts, Header: i.Header, UpdatedAt: i.UpdatedAt}
}
