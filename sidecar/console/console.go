package console

import (
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
)

//go:embed assets
var assets embed.FS

// CSP is the page's Content-Security-Policy: its own scripts, styles and
// API only; no inline script, no eval, no framing, no plugins.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// PreviewCookie carries a browser key's preview secret to /preview/ paths
// only (a link can send no header): HttpOnly, SameSite=Strict, never sent
// to /v1 and never a bearer there.
const PreviewCookie = "patina_preview"

// PreviewCSP is set on every preview answer (replacing the workspace's
// own): the page runs sandboxed without allow-same-origin, so its scripts
// run in an opaque origin, not the console's.
const PreviewCSP = "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads"

// PreviewPrefix is the path under which forwarded ports are previewed.
const PreviewPrefix = "/preview/"

// maxSignInBytes bounds a sign-in request body.
const maxSignInBytes = 4 << 10

// Config configures a Console. Zero values take the defaults noted.
type Config struct {
	// Token is the sidecar's token (a sign-in with it gets a key).
	Token string
	// XtermLib, XtermCSS and XtermFit are where xterm.js is installed
	// (defaults: Debian's node-xterm and libjs-xterm paths).
	XtermLib, XtermCSS, XtermFit string
	// KeyTTL and CodeTTL: see DefaultKeyTTL and DefaultCodeTTL.
	KeyTTL, CodeTTL time.Duration
	Logger          *slog.Logger
}

// Console serves the page and its sign-in. New, then mount Patterns.
type Console struct {
	token string
	keys  *Keys
	xterm *xterm
	log   *slog.Logger
	mux   *http.ServeMux
}

// New makes a Console.
func New(cfg Config) *Console {
	if cfg.XtermLib == "" {
		cfg.XtermLib = DefaultXtermLib
	}
	if cfg.XtermCSS == "" {
		cfg.XtermCSS = DefaultXtermCSS
	}
	if cfg.XtermFit == "" {
		cfg.XtermFit = DefaultXtermFit
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c := &Console{
		token: cfg.Token,
		keys:  NewKeys(cfg.KeyTTL, cfg.CodeTTL),
		xterm: &xterm{lib: cfg.XtermLib, css: cfg.XtermCSS, fit: cfg.XtermFit},
		log:   cfg.Logger.With("component", "console"),
		mux:   http.NewServeMux(),
	}
	c.mux.HandleFunc("GET /{$}", c.handlePage)
	c.mux.HandleFunc("GET /console/xterm.js", c.handleXtermJS)
	c.mux.HandleFunc("GET /console/xterm.css", c.handleXtermCSS)
	c.mux.HandleFunc("GET /console/{file}", c.handleAsset)
	c.mux.HandleFunc("POST /console/signin", c.handleSignIn)
	c.mux.HandleFunc("POST /console/signout", c.handleSignOut)
	return c
}

// Patterns are the ServeMux patterns the console serves (the page, its
// assets, sign-in and sign-out); mount each on the Console.
var Patterns = []string{"GET /{$}", "GET /console/", "POST /console/signin", "POST /console/signout"}

// ServeHTTP serves the console's paths with its security headers.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	c.mux.ServeHTTP(w, r)
}

// Keys is the console's store of codes and browser keys.
func (c *Console) Keys() *Keys { return c.keys }

// KeyOK says whether key, the bearer of r, is a live browser key that r
// may use. A key belongs to the console's own page: refused when the
// browser says another page sent r (Sec-Fetch-Site other than
// same-origin: a page on another port of the same host is same-site), and
// on a WebSocket (which no CORS guards) unless Origin is the sidecar's own
// host:port.
func (c *Console) KeyOK(r *http.Request, key string, websocket bool) bool {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" {
		return false
	}
	if websocket && !sameOrigin(r) {
		return false
	}
	return c.keys.Valid(key)
}

// PreviewAuthorized says whether r (a /preview/ request) carries a live
// preview secret in the preview cookie, and was not sent by a page of
// another origin. Browsers send that cookie to every port of the host: a
// workspace's forward, opened directly, is same-site with the console and
// may try to use it (its own preview pages run in an opaque origin, whose
// Origin is "null" and whose requests are cross-site).
func (c *Console) PreviewAuthorized(r *http.Request) bool {
	if r.Header.Get("Sec-Fetch-Site") == "same-site" {
		return false
	}
	if o := r.Header.Get("Origin"); o != "" && o != "null" && !sameOrigin(r) {
		return false
	}
	ck, err := r.Cookie(PreviewCookie)
	return err == nil && c.keys.ValidPreview(ck.Value)
}

func (c *Console) handlePage(w http.ResponseWriter, r *http.Request) {
	serveAsset(w, "index.html")
}

func (c *Console) handleAsset(w http.ResponseWriter, r *http.Request) {
	serveAsset(w, r.PathValue("file"))
}

var types = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".png":  "image/png",
}

func serveAsset(w http.ResponseWriter, name string) {
	b, err := fs.ReadFile(assets, "assets/"+name)
	ext := name[strings.LastIndexByte(name, '.')+1:]
	ct := types["."+ext]
	if err != nil || strings.Contains(name, "/") || ct == "" {
		http.Error(w, "no such file in the console", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", ct)
	_, _ = w.Write(b)
}

func (c *Console) handleXtermJS(w http.ResponseWriter, r *http.Request) {
	b, err := c.xterm.js()
	if err != nil {
		c.log.Warn("the console's terminal is unavailable", "err", err)
		// A script the page runs: it says what is missing.
		msg, _ := json.Marshal(err.Error())
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		_, _ = w.Write([]byte("window.XTERM_MISSING = " + string(msg) + ";\n"))
		return
	}
	w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	w.Header().Set("Cache-Control", "private, max-age=3600")
	_, _ = w.Write(b)
}

func (c *Console) handleXtermCSS(w http.ResponseWriter, r *http.Request) {
	b, err := c.xterm.stylesheet()
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	if err != nil {
		_, _ = w.Write([]byte("/* " + strings.ReplaceAll(err.Error(), "*/", "") + " */\n"))
		return
	}
	_, _ = w.Write(b)
}

// SignInRequest is the body of POST /console/signin: the token, or a
// one-time code from `patina ui`.
type SignInRequest struct {
	Token string `json:"token,omitempty"`
	Code  string `json:"code,omitempty"`
}

// SignInResult carries the browser key (a bearer for /v1; the preview
// secret goes in the preview cookie only).
type SignInResult struct {
	Key     string    `json:"key"`
	Expires time.Time `json:"expires"`
}

// errCrossOrigin refuses a sign-in or sign-out not made by the console's
// own page.
var errCrossOrigin = errors.New("sign in from the console's own page (the request's Origin is not this sidecar)")

// sameOrigin says whether r was sent by a page of this origin: Origin must
// be present and name r's host; Sec-Fetch-Site, when sent, must agree.
func sameOrigin(r *http.Request) bool {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" {
		return false
	}
	o, err := url.Parse(r.Header.Get("Origin"))
	if err != nil || o.Host == "" || (o.Scheme != "http" && o.Scheme != "https") {
		return false
	}
	return strings.EqualFold(o.Host, r.Host)
}

func (c *Console) handleSignIn(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		writeErr(w, http.StatusForbidden, "forbidden", errCrossOrigin.Error())
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		writeErr(w, http.StatusUnsupportedMediaType, "invalid", "send the sign-in as application/json")
		return
	}
	var req SignInRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxSignInBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeErr(w, http.StatusBadRequest, "invalid", "the sign-in must be {\"token\": …} or {\"code\": …}")
		return
	}
	var g Grant
	switch {
	case req.Token != "" && c.token != "" && subtle.ConstantTimeCompare([]byte(req.Token), []byte(c.token)) == 1:
		g = c.keys.NewKey()
	case req.Code != "":
		k, err := c.keys.Exchange(req.Code)
		if err != nil {
			c.log.Info("console sign-in refused", "remote", r.RemoteAddr)
			writeErr(w, http.StatusUnauthorized, "unauthorized", "the one-time code is wrong, used or expired: run patina ui again")
			return
		}
		g = k
	default:
		c.log.Info("console sign-in refused", "remote", r.RemoteAddr)
		writeErr(w, http.StatusUnauthorized, "unauthorized", "wrong token: it is in the sidecar's state directory (file token), or run patina ui for a link")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: PreviewCookie, Value: g.Preview, Path: PreviewPrefix,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: int(c.keys.keyTTL / time.Second)})
	c.log.Info("console sign-in", "remote", r.RemoteAddr, "with", map[bool]string{true: "code", false: "token"}[req.Code != ""])
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(SignInResult{Key: g.Key, Expires: g.Expires})
}

func (c *Console) handleSignOut(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		writeErr(w, http.StatusForbidden, "forbidden", errCrossOrigin.Error())
		return
	}
	if scheme, key, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		c.keys.Revoke(strings.TrimSpace(key))
	}
	http.SetCookie(w, &http.Cookie{Name: PreviewCookie, Value: "", Path: PreviewPrefix, HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	w.WriteHeader(http.StatusNoContent)
}

func writeErr(w http.ResponseWriter, code int, c, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg, "code": c})
}
