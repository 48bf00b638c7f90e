package sidecar

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/patina-dev/patina/sidecar/client"
	"github.com/patina-dev/patina/sidecar/secrets"
)

// The secrets API takes a value once and never answers with it; bad
// input is a 400 that keeps nothing, an unknown name a 404.
func TestSecretsAPI(t *testing.T) {
	v, err := secrets.Open(secrets.Config{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s := &Service{vault: v, token: "tok", cfg: Config{}.withDefaults()}
	h := s.routes()
	call := func(method, path, body string) (int, string) {
		t.Helper()
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer tok")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	const value = "Bearer ghp_never_shown_1234"
	body, _ := json.Marshal(client.SetSecretRequest{Host: "api.github.com", Hosts: []string{"*.githubusercontent.com"}, Header: "Authorization: " + value})
	code, out := call("PUT", "/v1/secrets/GH", string(body))
	var got client.Secret
	if code != 200 || json.Unmarshal([]byte(out), &got) != nil || got.Name != "GH" || got.Header != "Authorization" || len(got.Hosts) != 2 {
		t.Fatalf("PUT: exp 200 and the secret, got %d %s", code, out)
	}
	var answers bytes.Buffer
	answers.WriteString(out)
	for _, c := range []struct {
		method, path, body string
		code               int
	}{
		{"GET", "/v1/secrets", "", 200},
		{"GET", "/v1/secrets/GH", "", 200},
		{"GET", "/v1/secrets/NOPE", "", 404},
		{"DELETE", "/v1/secrets/NOPE", "", 404},
		{"PUT", "/v1/secrets/bad-name", string(body), 400},
		{"PUT", "/v1/secrets/GH2", `{"host": "10.0.0.5", "header": "X: y"}`, 400},
		{"PUT", "/v1/secrets/GH2", `{"host": "a.test", "header": "no colon"}`, 400},
		{"PUT", "/v1/secrets/GH2", `{"host": "a.test", "header": "X: y", "value": "z"}`, 400},
		{"PUT", "/v1/secrets/GH2", `{"header": "X: y"}`, 400},
		{"POST", "/v1/secrets/GH2", `{}`, 405},
	} {
		code, out := call(c.method, c.path, c.body)
		if code != c.code {
			t.Errorf("%s %s: exp %d, got %d %s", c.method, c.path, c.code, code, out)
		}
		answers.WriteString(out)
	}
	if strings.Contains(answers.String(), "ghp_never_shown") {
		t.Fatalf("an answer holds the secret's value:\n%s", answers.String())
	}
	if names := v.List(); len(names) != 1 {
		t.Fatalf("exp only GH kept, got %+v", names)
	}
	if code, _ := call("DELETE", "/v1/secrets/GH", ""); code != 204 {
		t.Fatalf("DELETE: exp 204, got %d", code)
	}
	if code, out := call("GET", "/v1/secrets", ""); code != 200 || strings.TrimSpace(out) != `{"secrets":[]}` {
		t.Fatalf("exp an empty list, got %d %s", code, out)
	}
	// Without the token, nothing.
	req := httptest.NewRequest("GET", "/v1/secrets", nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized {
		t.Fatalf("exp 401 without the token, got %d", rec.Code)
	}
}
