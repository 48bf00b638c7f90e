package sidecar

import (
	"bufio"
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/patina-dev/patina/sidecar/client"
	"github.com/patina-dev/patina/sidecar/workspace"
)

// route is one pattern of the API's router and its handler.
type route struct {
	pattern string
	handler http.HandlerFunc
}

// routeTable lists every pattern the router serves (the files routes,
// served before the router sees the path, are in filesRoutes). It is a
// method so that Routes can list the patterns without a Service.
func (s *Service) routeTable() []route {
	return []route{
		{"GET /healthz", s.handleHealth},
		{"GET " + client.IdentifyPath, s.handleIdentify},
		{"GET /v1/openapi.json", s.handleOpenAPI},

		{"POST /v1/workspaces", s.handleCreateWorkspace},
		{"GET /v1/workspaces", s.handleListWorkspaces},
		{"GET /v1/workspaces/{id}", s.handleGetWorkspace},
		{"POST /v1/workspaces/{id}/stop", s.handleStopWorkspace},
		{"POST /v1/workspaces/{id}/start", s.handleStartWorkspace},
		{"POST /v1/workspaces/{id}/fork", s.handleForkWorkspace},
		{"POST /v1/workspaces/{id}/snapshot", s.handleSnapshotWorkspace},
		{"DELETE /v1/workspaces/{id}", s.handleDeleteWorkspace},
		{"PUT /v1/workspaces/{id}/network", s.handleSetNetwork},

		{"POST /v1/workspaces/{id}/sessions", s.handleCreateSession},
		{"GET /v1/workspaces/{id}/sessions", s.handleListSessions},
		{"GET /v1/workspaces/{id}/sessions/{sid}", s.handleGetSession},
		{"DELETE /v1/workspaces/{id}/sessions/{sid}", s.handleDeleteSession},
		{"POST /v1/workspaces/{id}/sessions/{sid}/env", s.handleSetEnv},
		{"POST /v1/workspaces/{id}/sessions/{sid}/restart", s.handleRestartSession},
		{"POST /v1/workspaces/{id}/sessions/{sid}/exec", s.handleExec},
		{"GET /v1/workspaces/{id}/sessions/{sid}/terminal", s.handleTerminal},
		{"GET /v1/workspaces/{id}/sessions/{sid}/commands", s.handleHistory},
		{"GET /v1/workspaces/{id}/sessions/{sid}/commands/{cid}", s.handleGetCommand},
		{"GET /v1/workspaces/{id}/sessions/{sid}/commands/{cid}/stdout", s.handleOutput},
		{"GET /v1/workspaces/{id}/sessions/{sid}/commands/{cid}/stderr", s.handleOutput},
		{"POST /v1/workspaces/{id}/sessions/{sid}/commands/{cid}/signal", s.handleSignal},

		{"GET /v1/workspaces/{id}/diff", s.handleDiff},
		{"POST /v1/workspaces/{id}/commit", s.handleCommit},
		{"POST /v1/workspaces/{id}/merge", s.handleMerge},
		{"POST /v1/workspaces/{id}/apply", s.handleApply},
		{"GET /v1/workspaces/{id}/log", s.handleLog},

		{"POST /v1/workspaces/{id}/ports", s.handleForwardPort},
		{"GET /v1/workspaces/{id}/ports", s.handleListPorts},
		{"DELETE /v1/workspaces/{id}/ports/{port}", s.handleClosePort},
		{"DELETE /v1/workspaces/{id}/ports", s.handleClosePort},

		{"POST /v1/templates", s.handleBuildTemplate},
		{"GET /v1/templates", s.handleListTemplates},
		{"GET /v1/templates/{name}", s.handleGetTemplate},
		{"DELETE /v1/templates/{name}", s.handleDeleteTemplate},

		{"PUT /v1/secrets/{name}", s.handleSetSecret},
		{"GET /v1/secrets", s.handleListSecrets},
		{"GET /v1/secrets/{name}", s.handleGetSecret},
		{"DELETE /v1/secrets/{name}", s.handleDeleteSecret},

		// The web console's (handlers_console.go, handlers_events.go).
		{"GET /v1/events", s.handleEvents},
		{"POST /v1/console/codes", s.handleConsoleCode},
	}
}

// filesRoutes are the patterns handleFiles serves (routed by filesPath,
// before ServeMux would clean a path with ".."); {path...} may hold "/".
var filesRoutes = []string{
	"GET /v1/workspaces/{id}/files", "HEAD /v1/workspaces/{id}/files",
	"GET /v1/workspaces/{id}/files/{path...}", "HEAD /v1/workspaces/{id}/files/{path...}",
	"PUT /v1/workspaces/{id}/files/{path...}", "DELETE /v1/workspaces/{id}/files/{path...}",
}

// Routes lists every "METHOD /path" pattern the API serves, in ServeMux's
// syntax: the OpenAPI document must describe exactly these.
func Routes() []string {
	var out []string
	for _, r := range (*Service)(nil).routeTable() {
		out = append(out, r.pattern)
	}
	return append(out, filesRoutes...)
}

// routes builds the API's handler.
func (s *Service) routes() http.Handler {
	mux := http.NewServeMux()
	for _, r := range s.routeTable() {
		mux.HandleFunc(r.pattern, r.handler)
	}
	for _, r := range s.pageRoutes() {
		mux.HandleFunc(r.pattern, r.handler)
	}

	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if allow := allowed(mux, r); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(w, fmt.Errorf("%w: %s %s; use %s", errMethod, r.Method, r.URL.Path, strings.Join(allow, " or ")))
			return
		}
		writeError(w, fmt.Errorf("%w: no such endpoint %s %s", errNotFound, r.Method, r.URL.Path))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.log != nil && s.log.Enabled(r.Context(), slog.LevelDebug) {
			// One line per request with --log-level debug: never the query
			// (a terminal's may hold the token) nor a body.
			sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
			start := time.Now()
			defer func() {
				s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", sw.code, "duration_ms", time.Since(start).Milliseconds())
			}()
			w = sw
		}
		if strings.HasPrefix(r.URL.Path, "/v1/") && r.URL.Path != openAPIPath && r.URL.Path != client.IdentifyPath && !s.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="patina"`)
			writeError(w, fmt.Errorf("%w: send Authorization: Bearer <token> (the token is in the sidecar's state directory)", errUnauthorized))
			return
		}
		// Files are routed here, before ServeMux would clean (and redirect)
		// a path with "..": such a path is refused, not rewritten.
		if id, rest, ok := filesPath(r.URL.Path); ok {
			s.handleFiles(w, r, id, rest)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// allowed lists the methods the API serves at r's path (none: no such
// endpoint). ServeMux would answer 405 itself but for the catch-all "/".
func allowed(mux *http.ServeMux, r *http.Request) []string {
	var out []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := mux.Handler(probe); pattern != "/" && pattern != "" {
			out = append(out, m)
		}
	}
	return out
}

// filesPath splits /v1/workspaces/{id}/files[/{path...}].
func filesPath(p string) (id, rest string, ok bool) {
	const pre = "/v1/workspaces/"
	if !strings.HasPrefix(p, pre) {
		return "", "", false
	}
	parts := strings.SplitN(p[len(pre):], "/", 3)
	if len(parts) < 2 || parts[1] != "files" || parts[0] == "" {
		return "", "", false
	}
	if len(parts) == 3 {
		rest = parts[2]
	}
	return parts[0], rest, true
}

// terminalPath is the one path that may take its token as ?token=.
var terminalPath = regexp.MustCompile(`^/v1/workspaces/[^/]+/sessions/[^/]+/terminal$`)

func (s *Service) authorized(r *http.Request) bool {
	// The scheme is case-insensitive (RFC 9110).
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		// A browser cannot set headers on a WebSocket: a terminal may
		// take the token as ?token=.
		if q := r.URL.Query().Get("token"); q != "" && terminalPath.MatchString(r.URL.Path) {
			return s.bearerOK(r, q)
		}
		return false
	}
	return s.bearerOK(r, strings.TrimSpace(tok))
}

// bearerOK says whether tok is the token, or a live browser key of the web
// console that r may use (console.KeyOK: a terminal's WebSocket only from
// the console's own origin). The preview cookie's secret never is.
func (s *Service) bearerOK(r *http.Request, tok string) bool {
	if s.isToken(tok) {
		return true
	}
	ws := terminalPath.MatchString(r.URL.Path) || strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
	return s.console.KeyOK(r, tok, ws)
}

// isToken says whether tok is the sidecar's token itself.
func (s *Service) isToken(tok string) bool {
	return s.token != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(s.token)) == 1
}

// tokenBearer says whether r's bearer is the sidecar's token itself (not a
// browser key).
func (s *Service) tokenBearer(r *http.Request) bool {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	return ok && strings.EqualFold(scheme, "Bearer") && s.isToken(strings.TrimSpace(tok))
}

func (s *Service) handleHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "version": s.cfg.Version})
}

// nonceRE is an identify request's nonce: 32 to 128 hex digits.
var nonceRE = regexp.MustCompile(`^[0-9a-f]{32,128}$`)

// handleIdentify proves, without the token, that this sidecar holds it
// (client.Verifying): a client asks before it sends the token.
func (s *Service) handleIdentify(w http.ResponseWriter, r *http.Request) {
	nonce := r.URL.Query().Get("nonce")
	if !nonceRE.MatchString(nonce) {
		writeError(w, fmt.Errorf("%w: nonce must be 32 to 128 lowercase hex digits", errInvalid))
		return
	}
	writeJSON(w, http.StatusOK, client.Identity{Proof: client.IdentityProof(s.token, nonce)})
}

// writeJSON writes v with the given status (no HTML escaping: commands
// keep their & < >).
func writeJSON(w http.ResponseWriter, code int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// writeError writes {"error", "code"} with the status the error maps to.
func writeError(w http.ResponseWriter, err error) {
	code, c := status(err)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	body := client.ErrorBody{Error: message(err), Code: c}
	var fe *workspace.FieldError
	if errors.As(err, &fe) {
		body.Field = fe.Field
	}
	_ = enc.Encode(body)
}

// decode reads a JSON body into v: at most limit bytes (else errTooLarge),
// no unknown fields, nothing after the value. An empty body is allowed when
// optional (v keeps its zero value).
func decode(w http.ResponseWriter, r *http.Request, v any, limit int64, optional bool) error {
	body := http.MaxBytesReader(w, r.Body, limit)
	var raw json.RawMessage
	dec := json.NewDecoder(body)
	if err := dec.Decode(&raw); err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return fmt.Errorf("%w: the limit is %d bytes", errTooLarge, limit)
		case errors.Is(err, io.EOF) && optional:
			return nil
		case errors.Is(err, io.EOF):
			return fmt.Errorf("%w: empty body, want a JSON object", errInvalid)
		}
		return fmt.Errorf("%w: invalid JSON body: %v", errInvalid, err)
	}
	if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return fmt.Errorf("%w: the limit is %d bytes", errTooLarge, limit)
		}
		return fmt.Errorf("%w: unexpected data after the JSON object", errInvalid)
	}
	if err := exactFields(raw, v); err != nil {
		return err
	}
	strict := json.NewDecoder(bytes.NewReader(raw))
	strict.DisallowUnknownFields()
	if err := strict.Decode(v); err != nil {
		return fmt.Errorf("%w: invalid JSON body: %v", errInvalid, err)
	}
	return nil
}

// exactFields refuses an object key that is not exactly one of v's JSON
// field names: encoding/json would match "COMMAND" to "command".
func exactFields(raw json.RawMessage, v any) error {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return nil // not an object: the strict decode says what is wrong
	}
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	names := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" {
			name = f.Name
		}
		names[name] = true
	}
	for k := range obj {
		if !names[k] {
			return fmt.Errorf("%w: invalid JSON body: unknown field %q", errInvalid, k)
		}
	}
	return nil
}

// statusWriter records the status a handler answered, for the debug log.
// It passes on Flush and Hijack (SSE, WebSocket) and unwraps for
// http.ResponseController.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if w.code == http.StatusOK {
		w.code = http.StatusSwitchingProtocols
	}
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
