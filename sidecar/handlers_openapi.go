package sidecar

import (
	"net/http"

	"github.com/patina-dev/patina/sidecar/openapi"
)

// openAPIPath serves the API's OpenAPI document; it needs no token (the
// document is public: it says what the API is, nothing of its state).
const openAPIPath = "/v1/openapi.json"

func (s *Service) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(openapi.Document)
}
