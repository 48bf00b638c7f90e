package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/patina-dev/patina/sidecar/client"
)

// fakeSidecar is an httptest server speaking enough of the v1 API for the
// CLI's tests: workspaces, sessions, and exec driven by a test's function.
// Its state directory holds sidecar.json and token, as a real sidecar's.
type fakeSidecar struct {
	t        *testing.T
	srv      *httptest.Server
	stateDir string
	token    string

	mu         sync.Mutex
	workspaces []client.Workspace
	sessions   map[string]bool // session ids of workspace "demo"
	calls      []string        // "METHOD path" of each authorised call
	execReqs   []client.ExecRequest
	// exec answers an exec in an existing session (default: exit 0).
	exec func(w http.ResponseWriter, r *http.Request, req client.ExecRequest)
	// diff and commit are the answers of diff and commit.
	diff   client.Diff
	commit client.CommitResult
	// secretReqs are the PUT /v1/secrets/{name} bodies, by name.
	secretReqs map[string]client.SetSecretRequest
}

func newFakeSidecar(t *testing.T) *fakeSidecar {
	t.Helper()
	f := &fakeSidecar{
		t:        t,
		stateDir: t.TempDir(),
		token:    "secret-token",
		workspaces: []client.Workspace{{
			ID: "w1", Name: "demo", Status: "running", Image: "patina/base:bookworm",
			ContainerID: "c0ffee", CreatedAt: testNow,
			Repo: "/home/me/repo", Branch: "patina/demo", Base: "refs/heads/main",
		}},
		sessions: map[string]bool{"default": true},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/workspaces", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		writeFakeJSON(w, http.StatusOK, f.workspaces)
	})
	mux.HandleFunc("GET /v1/workspaces/{id}", func(w http.ResponseWriter, r *http.Request) {
		if !f.known(w, r) {
			return
		}
		writeFakeJSON(w, http.StatusOK, f.workspaces[0])
	})
	mux.HandleFunc("POST /v1/console/codes", func(w http.ResponseWriter, r *http.Request) {
		writeFakeJSON(w, http.StatusCreated, client.ConsoleCode{Code: "c0de", Path: "/#code=c0de", Expires: testNow})
	})
	mux.HandleFunc("PUT /v1/secrets/{name}", func(w http.ResponseWriter, r *http.Request) {
		var req client.SetSecretRequest
		json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		if f.secretReqs == nil {
			f.secretReqs = map[string]client.SetSecretRequest{}
		}
		f.secretReqs[r.PathValue("name")] = req
		f.mu.Unlock()
		name, _, _ := strings.Cut(req.Header, ":")
		writeFakeJSON(w, http.StatusOK, client.Secret{Name: r.PathValue("name"), Hosts: req.Hosts, Header: name, UpdatedAt: testNow})
	})
	mux.HandleFunc("DELETE /v1/workspaces/{id}", func(w http.ResponseWriter, r *http.Request) {
		if !f.known(w, r) {
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /v1/workspaces/{id}/sessions", func(w http.ResponseWriter, r *http.Request) {
		if !f.known(w, r) {
			return
		}
		var req client.CreateSessionRequest
		json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.sessions[req.ID] {
			writeFakeError(w, http.StatusConflict, client.CodeConflict, "session exists")
			return
		}
		f.sessions[req.ID] = true
		writeFakeJSON(w, http.StatusCreated, client.Session{ID: req.ID, Status: "idle"})
	})
	mux.HandleFunc("POST /v1/workspaces/{id}/sessions/{sid}/restart", func(w http.ResponseWriter, r *http.Request) {
		f.withSession(w, r, func(sid string) {
			writeFakeJSON(w, http.StatusOK, client.Session{ID: sid, Status: "idle"})
		})
	})
	mux.HandleFunc("DELETE /v1/workspaces/{id}/sessions/{sid}", func(w http.ResponseWriter, r *http.Request) {
		f.withSession(w, r, func(sid string) {
			delete(f.sessions, sid)
			w.WriteHeader(http.StatusNoContent)
		})
	})
	mux.HandleFunc("GET /v1/workspaces/{id}/diff", func(w http.ResponseWriter, r *http.Request) {
		if !f.known(w, r) {
			return
		}
		f.mu.Lock()
		d := f.diff
		f.mu.Unlock()
		writeFakeJSON(w, http.StatusOK, d)
	})
	mux.HandleFunc("POST /v1/workspaces/{id}/commit", func(w http.ResponseWriter, r *http.Request) {
		if !f.known(w, r) {
			return
		}
		f.mu.Lock()
		c := f.commit
		f.mu.Unlock()
		writeFakeJSON(w, http.StatusOK, c)
	})
	mux.HandleFunc("POST /v1/workspaces/{id}/merge", func(w http.ResponseWriter, r *http.Request) {
		if !f.known(w, r) {
			return
		}
		var req client.MergeRequest
		json.NewDecoder(r.Body).Decode(&req)
		if req.Into == "nosuch" {
			// As the sidecar says it: with the id and its packages' prefixes.
			writeFakeError(w, http.StatusNotFound, client.CodeNotFound,
				`merge w1: target branch refs/heads/nosuch: worktree: not found: revision "refs/heads/nosuch"`)
			return
		}
		if req.Commit == "" {
			// As the sidecar says it when the workspace moved since the diff.
			writeFakeError(w, http.StatusConflict, client.CodeConflict,
				"workspace demo changed since you reviewed it at 1111111111 (it is at 2222222222 now): look at the diff again (patina ws diff demo) and merge")
			return
		}
		writeFakeJSON(w, http.StatusOK, client.MergeResult{Into: "refs/heads/main", Previous: "aaaa", Commit: req.Commit, Merged: req.Commit, FastForward: true})
	})
	mux.HandleFunc("POST /v1/workspaces/{id}/apply", func(w http.ResponseWriter, r *http.Request) {
		if !f.known(w, r) {
			return
		}
		writeFakeJSON(w, http.StatusOK, client.ApplyResult{Dir: "/home/me/repo", Files: []client.FileStat{
			{Path: "README", Status: "modified", Added: 1},
		}})
	})
	mux.HandleFunc("POST /v1/workspaces/{id}/sessions/{sid}/exec", func(w http.ResponseWriter, r *http.Request) {
		if !f.known(w, r) {
			return
		}
		var req client.ExecRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			writeFakeError(w, http.StatusBadRequest, client.CodeInvalid, err.Error())
			return
		}
		sid := r.PathValue("sid")
		f.mu.Lock()
		if sid == "default" {
			f.sessions[sid] = true // created on first use, as the sidecar does
		}
		ok := f.sessions[sid]
		f.execReqs = append(f.execReqs, req)
		exec := f.exec
		f.mu.Unlock()
		if !ok {
			writeFakeError(w, http.StatusNotFound, client.CodeNotFound, "session "+sid+": not found")
			return
		}
		if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			writeFakeError(w, http.StatusBadRequest, client.CodeInvalid, "the CLI must stream")
			return
		}
		if exec == nil {
			exec = func(w http.ResponseWriter, r *http.Request, req client.ExecRequest) {
				writeSSE(w, "exit", client.StreamEvent{Result: &client.ExecResult{}})
			}
		}
		w.Header().Set("Content-Type", "text/event-stream")
		exec(w, r, req)
	})
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			writeFakeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
			return
		}
		if r.URL.Path == client.IdentifyPath {
			writeFakeJSON(w, http.StatusOK, client.Identity{Proof: client.IdentityProof(f.token, r.URL.Query().Get("nonce"))})
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+f.token {
			writeFakeError(w, http.StatusUnauthorized, client.CodeUnauthorized, "missing or wrong bearer token")
			return
		}
		f.mu.Lock()
		f.calls = append(f.calls, r.Method+" "+r.URL.Path)
		f.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	addr := strings.TrimPrefix(f.srv.URL, "http://")
	mustWrite(t, filepath.Join(f.stateDir, discoveryFile), fmt.Sprintf(`{"addr":%q,"pid":1,"version":"test"}`, addr))
	mustWrite(t, filepath.Join(f.stateDir, tokenFile), f.token+"\n")
	return f
}

// env is an environment that points patina at the fake through its state
// directory alone.
func (f *fakeSidecar) env() map[string]string {
	return map[string]string{envStateDir: f.stateDir}
}

// known answers 404 unless the path names workspace demo (by name or id).
func (f *fakeSidecar) known(w http.ResponseWriter, r *http.Request) bool {
	if id := r.PathValue("id"); id != "demo" && id != "w1" {
		writeFakeError(w, http.StatusNotFound, client.CodeNotFound, fmt.Sprintf("no workspace %q", id))
		return false
	}
	return true
}

// withSession runs fn with f.mu held for the session the request names, or
// answers 404 when its workspace or the session does not exist.
func (f *fakeSidecar) withSession(w http.ResponseWriter, r *http.Request, fn func(sid string)) {
	if !f.known(w, r) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	sid := r.PathValue("sid")
	if !f.sessions[sid] {
		writeFakeError(w, http.StatusNotFound, client.CodeNotFound, "no session "+sid)
		return
	}
	fn(sid)
}

func (f *fakeSidecar) callList() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeSidecar) lastExec() client.ExecRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.execReqs) == 0 {
		f.t.Fatal("no exec reached the fake sidecar")
	}
	return f.execReqs[len(f.execReqs)-1]
}

func writeFakeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeFakeError(w http.ResponseWriter, status int, code, msg string) {
	writeFakeJSON(w, status, client.ErrorBody{Error: msg, Code: code})
}

// writeSSE writes one event as the sidecar does, and flushes it.
func writeSSE(w http.ResponseWriter, event string, ev client.StreamEvent) {
	b, _ := json.Marshal(ev)
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
	w.(http.Flusher).Flush()
}

func mustWrite(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}
