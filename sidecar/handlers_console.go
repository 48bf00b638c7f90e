package sidecar

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/patina-dev/patina/internal/proxybody"
	"github.com/patina-dev/patina/sidecar/client"
	"github.com/patina-dev/patina/sidecar/console"
	"github.com/patina-dev/patina/sidecar/workspace"
)

// pageRoutes are the routes outside /v1: the web console (package
// console), the preview of forwarded ports and /metrics. They are not
// part of the API's OpenAPI document (Routes); each authenticates itself.
func (s *Service) pageRoutes() []route {
	out := []route{
		{"GET " + console.PreviewPrefix + "{id}/{port}/{rest...}", s.handlePreview},
		{"POST " + console.PreviewPrefix + "{id}/{port}/{rest...}", s.handlePreview},
		{"PUT " + console.PreviewPrefix + "{id}/{port}/{rest...}", s.handlePreview},
		{"DELETE " + console.PreviewPrefix + "{id}/{port}/{rest...}", s.handlePreview},
		{"PATCH " + console.PreviewPrefix + "{id}/{port}/{rest...}", s.handlePreview},
		{"HEAD " + console.PreviewPrefix + "{id}/{port}/{rest...}", s.handlePreview},
		{"GET /metrics", s.handleMetrics},
	}
	for _, p := range console.Patterns {
		out = append(out, route{p, s.console.ServeHTTP})
	}
	return out
}

// handleConsoleCode serves POST /v1/console/codes: a one-time code that
// signs a browser in to the console once (`patina ui`). Only the token
// makes one: a browser key that could would renew itself forever.
func (s *Service) handleConsoleCode(w http.ResponseWriter, r *http.Request) {
	if !s.tokenBearer(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="patina"`)
		writeError(w, fmt.Errorf("%w: a sign-in code needs the sidecar's token as the bearer (a console key cannot make one)", errUnauthorized))
		return
	}
	code, exp := s.console.Keys().NewCode()
	writeJSON(w, http.StatusCreated, client.ConsoleCode{Code: code, Path: "/#code=" + code, Expires: exp})
}

// handleMetrics serves /metrics: with the token (or a console key) as a
// bearer here; without one on --metrics-addr (MetricsHandler).
func (s *Service) handleMetrics(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="patina"`)
		writeError(w, fmt.Errorf("%w: send Authorization: Bearer <token>, or serve metrics without a token on --metrics-addr", errUnauthorized))
		return
	}
	s.metrics.Handler().ServeHTTP(w, r)
}

// MetricsHandler serves the metrics with no token (for --metrics-addr, a
// separate listener the operator chooses).
func (s *Service) MetricsHandler() http.Handler { return s.metrics.Handler() }

// previewHop are request headers that never reach a workspace: the
// credentials of the console and of the API, and the browser's cookies.
var previewHop = []string{"Authorization", "Cookie", "Proxy-Authorization"}

// previewDrop are response headers of a workspace that never reach the
// browser: they would act on the console's origin (its cookies, its
// storage, where it goes next).
var previewDrop = []string{"Set-Cookie", "Clear-Site-Data", "Refresh"}

// errPreviewRedirect is a workspace's redirect out of its own preview.
var errPreviewRedirect = errors.New("redirect out of the preview")

// previewLocation maps a workspace's Location (relative, or absolute to its
// own forward addr) to its place under prefix; anywhere else is
// errPreviewRedirect. The Location is read as a browser would (a "\" is a
// "/", tabs and newlines are dropped, outer blanks trimmed) and written out
// whole, so what the browser follows is what was checked.
func previewLocation(loc, prefix, addr, reqPath string) (string, error) {
	loc = strings.Map(func(r rune) rune {
		switch r {
		case '\\':
			return '/'
		case '\t', '\n', '\r':
			return -1
		}
		return r
	}, strings.TrimFunc(loc, func(r rune) bool { return r <= ' ' }))
	u, err := url.Parse(loc)
	if err != nil {
		return "", fmt.Errorf("%w: %q is not a URL", errPreviewRedirect, loc)
	}
	if strings.HasPrefix(loc, "//") { // "///host" too names a host to a browser
		return "", fmt.Errorf("%w: %q", errPreviewRedirect, loc)
	}
	base := &url.URL{Scheme: "http", Host: addr, Path: reqPath}
	abs := base.ResolveReference(u)
	if !strings.EqualFold(abs.Scheme, "http") || !strings.EqualFold(abs.Host, addr) || abs.User != nil {
		return "", fmt.Errorf("%w: %q", errPreviewRedirect, loc)
	}
	path := abs.EscapedPath()
	if path == "" {
		path = "/"
	}
	out := prefix + path
	if abs.RawQuery != "" {
		out += "?" + abs.RawQuery
	}
	if abs.Fragment != "" {
		out += "#" + abs.EscapedFragment()
	}
	return out, nil
}

// previewFlush is how often a preview's answer is flushed to the browser
// while it streams (server-sent events, a dev server's reload channel).
const previewFlush = 100 * time.Millisecond

// handlePreview serves /preview/{id}/{port}/…: a forwarded port of a
// workspace, through the sidecar, for a signed-in console (its preview
// cookie) or a bearer. Only ports the workspace forwards are reached, and
// only through their forward: never another workspace or the host.
func (s *Service) handlePreview(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) && !s.console.PreviewAuthorized(r) {
		writeError(w, fmt.Errorf("%w: sign in to the console first (open / on this sidecar)", errUnauthorized))
		return
	}
	// A preview is the workspace's own page under the console's origin: it
	// may not install a service worker that outlives it.
	if r.Header.Get("Service-Worker") != "" {
		writeError(w, fmt.Errorf("%w: previews may not register service workers", errInvalid))
		return
	}
	id := r.PathValue("id")
	port, err := strconv.Atoi(r.PathValue("port"))
	if err != nil {
		writeError(w, fmt.Errorf("%w: port must be a number, got %q", errInvalid, r.PathValue("port")))
		return
	}
	ports, err := s.mgr.Ports(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	var addr string
	for _, p := range ports {
		if p.Port == port {
			addr = p.Address
		}
	}
	if addr == "" {
		writeError(w, fmt.Errorf("%w: workspace %s does not forward port %d; forward it first (patina port %s %d)", errNotFound, id, port, id, port))
		return
	}
	prefix := console.PreviewPrefix + url.PathEscape(id) + "/" + strconv.Itoa(port)
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", addr
			pr.Out.URL.Path = "/" + pr.In.PathValue("rest")
			pr.Out.URL.RawPath = ""
			pr.Out.Host = addr
			for _, h := range previewHop {
				pr.Out.Header.Del(h)
			}
			pr.Out.Header.Set("X-Forwarded-Prefix", prefix)
			proxybody.Limit(pr.Out)
		},
		ModifyResponse: func(resp *http.Response) error {
			// The workspace may not set or clear cookies or storage on the
			// console's origin, nor send its visitors elsewhere.
			for _, h := range previewDrop {
				resp.Header.Del(h)
			}
			// Its page runs sandboxed, in an origin of its own (opaque): its
			// scripts cannot read the console, its key or another
			// workspace's preview, whatever CORS headers it sends.
			resp.Header.Set("Content-Security-Policy", console.PreviewCSP)
			for k := range resp.Header {
				if strings.HasPrefix(strings.ToLower(k), "access-control-") {
					resp.Header.Del(k)
				}
			}
			if loc := resp.Header.Get("Location"); loc != "" {
				to, err := previewLocation(loc, prefix, addr, resp.Request.URL.Path)
				if err != nil {
					return err
				}
				resp.Header.Set("Location", to)
			}
			s.metrics.Streamed("preview", int(max(resp.ContentLength, 0)))
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, errPreviewRedirect) {
				writeError(w, fmt.Errorf("port %d of workspace %s answered with a %w; a preview follows redirects within that port only", port, id, err))
				return
			}
			writeError(w, fmt.Errorf("%w: nothing answered on port %d of workspace %s: %v", workspace.ErrNotListening, port, id, err))
		},
		FlushInterval: previewFlush,
	}
	proxy.ServeHTTP(w, r)
}
