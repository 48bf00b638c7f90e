package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/patina-dev/patina/internal/proxybody"
	"github.com/patina-dev/patina/sidecar/openapi"
)

// The API's OpenAPI document (sidecar/openapi/openapi.json), loaded once,
// and a router over it that knows patina's one multi-segment parameter
// (a file's {path}).
var (
	specOnce sync.Once
	specDoc  *apiSpec
	specErr  error
)

type apiSpec struct {
	doc    *openapi3.T
	routes []specRoute
}

type specRoute struct {
	path  string
	re    *regexp.Regexp
	names []string
	item  *openapi3.PathItem
}

func loadSpec() (*apiSpec, error) {
	specOnce.Do(func() {
		// A mismatch names the field and why, not the whole schema.
		openapi3.SchemaErrorDetailsDisabled = true
		doc, err := openapi3.NewLoader().LoadFromData(openapi.Document)
		if err == nil {
			err = doc.Validate(context.Background())
		}
		if err != nil {
			specErr = fmt.Errorf("sidecar/openapi/openapi.json: %w", err)
			return
		}
		s := &apiSpec{doc: doc}
		param := regexp.MustCompile(`\{([a-z_]+)\}`)
		for path, item := range doc.Paths.Map() {
			var names []string
			expr := param.ReplaceAllStringFunc(path, func(m string) string {
				name := m[1 : len(m)-1]
				names = append(names, name)
				if name == "path" {
					return "(.+)" // a file's path: any number of segments
				}
				return "([^/]+)"
			})
			if strings.HasSuffix(path, "/files") {
				expr += "/?" // …/files/ is the top directory too
			}
			s.routes = append(s.routes, specRoute{path: path, re: regexp.MustCompile("^" + expr + "$"), names: names, item: item})
		}
		specDoc = s
	})
	return specDoc, specErr
}

// find returns the documented operation for a request, with its path
// parameters; ok is false when the document has none for it.
func (s *apiSpec) find(method string, u *url.URL) (*routers.Route, map[string]string, bool) {
	p := u.EscapedPath()
	for _, r := range s.routes {
		m := r.re.FindStringSubmatch(p)
		if m == nil {
			continue
		}
		op := r.item.GetOperation(method)
		if op == nil {
			return nil, nil, false
		}
		params := map[string]string{}
		for i, name := range r.names {
			v, err := url.PathUnescape(m[i+1])
			if err != nil {
				v = m[i+1]
			}
			params[name] = v
		}
		return &routers.Route{Spec: s.doc, Path: r.path, PathItem: r.item, Method: method, Operation: op}, params, true
	}
	return nil, nil, false
}

// validatingTransport checks the traffic it carries against the OpenAPI
// document: every answer of a documented operation must match it (its
// status among the documented ones, its JSON body and each server-sent
// event of the schema given); with checkRequests, every request must be
// a documented operation, and one that does not match the document must be
// refused by the sidecar (a 4xx): a sidecar that accepts what the document
// forbids has drifted from it. Mismatches go to report.
type validatingTransport struct {
	base          http.RoundTripper
	checkRequests bool
	report        func(format string, args ...any)
}

// maxValidatedBody bounds what is buffered to be validated.
const maxValidatedBody = 64 << 20

func mediaType(h http.Header) string {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return mt
}

func (v *validatingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	spec, err := loadSpec()
	if err != nil {
		v.report("%v", err)
		return v.base.RoundTrip(req)
	}
	route, params, ok := spec.find(req.Method, req.URL)
	if !ok {
		if v.checkRequests {
			v.report("openapi: %s %s is not an operation of sidecar/openapi/openapi.json", req.Method, req.URL.Path)
		}
		return v.base.RoundTrip(req)
	}
	what := req.Method + " " + req.URL.RequestURI()
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}}
	var reqErr error
	send := req
	if v.checkRequests {
		probe := req.Clone(req.Context())
		probe.Body = http.NoBody
		switch {
		case mediaType(req.Header) != "application/json" || req.Body == nil || req.Body == http.NoBody:
			in.Options.ExcludeRequestBody = true
		case req.GetBody != nil:
			if body, err := req.GetBody(); err == nil {
				b, _ := io.ReadAll(io.LimitReader(body, maxValidatedBody))
				body.Close()
				probe.Body = io.NopCloser(bytes.NewReader(b))
			}
		default:
			// A body that cannot be had twice (a proxied request's): read
			// its head here and send it whole.
			b, _ := io.ReadAll(io.LimitReader(req.Body, maxValidatedBody))
			probe.Body = io.NopCloser(bytes.NewReader(b))
			send = req.Clone(req.Context())
			send.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(b), req.Body), req.Body}
			proxybody.Limit(send)
		}
		in.Request = probe
		reqErr = openapi3filter.ValidateRequest(req.Context(), in)
		in.Request = req
	}
	resp, err := v.base.RoundTrip(send)
	if err != nil {
		return resp, err
	}
	if reqErr != nil && resp.StatusCode < 400 {
		v.report("openapi: the request %s does not match the document, yet the sidecar answered %d: %v", what, resp.StatusCode, reqErr)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
	mt := mediaType(resp.Header)
	switch {
	case resp.StatusCode == http.StatusSwitchingProtocols || req.Method == http.MethodHead || mt != "application/json":
		// The body is a WebSocket, absent, raw bytes or events: the status
		// and headers are checked here, events as they stream.
		out.Options.ExcludeResponseBody = true
		out.Body = http.NoBody
		if mt == "text/event-stream" {
			resp.Body = newEventChecker(resp.Body, spec, route, resp.StatusCode, what, v.report)
		}
	default:
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxValidatedBody))
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		resp.Body = io.NopCloser(bytes.NewReader(b))
		out.Body = io.NopCloser(bytes.NewReader(b))
	}
	if err := openapi3filter.ValidateResponse(req.Context(), out); err != nil {
		v.report("openapi: the answer %d to %s does not match the document: %v", resp.StatusCode, what, err)
	}
	return resp, nil
}

// eventChecker passes a text/event-stream through, validating each
// event's data against the schema the operation's x-sse-events names.
type eventChecker struct {
	io.ReadCloser
	pw     *io.PipeWriter
	done   chan struct{}
	closed sync.Once
}

func newEventChecker(body io.ReadCloser, spec *apiSpec, route *routers.Route, status int, what string, report func(string, ...any)) io.ReadCloser {
	events := map[string]*openapi3.Schema{}
	if r := route.Operation.Responses.Status(status); r != nil && r.Value != nil {
		if mt := r.Value.Content.Get("text/event-stream"); mt != nil {
			if m, ok := mt.Extensions["x-sse-events"].(map[string]any); ok {
				for ev, ref := range m {
					name := strings.TrimPrefix(fmt.Sprint(ref), "#/components/schemas/")
					if s := spec.doc.Components.Schemas[name]; s != nil {
						events[ev] = s.Value
					}
				}
			}
		}
	}
	if len(events) == 0 {
		report("openapi: %s answered events, but the document names no x-sse-events for %d", what, status)
	}
	pr, pw := io.Pipe()
	c := &eventChecker{pw: pw, done: make(chan struct{})}
	c.ReadCloser = struct {
		io.Reader
		io.Closer
	}{io.TeeReader(body, pw), closerFunc(func() error {
		err := body.Close()
		c.finish()
		return err
	})}
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 32<<20)
		var event string
		var data strings.Builder
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if event != "" {
					check(events, event, data.String(), what, report)
				}
				event = ""
				data.Reset()
			case strings.HasPrefix(line, "event:"):
				event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
			case strings.HasPrefix(line, "data:"):
				data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	return c
}

func (c *eventChecker) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	if err != nil {
		c.finish()
	}
	return n, err
}

func (c *eventChecker) finish() {
	c.closed.Do(func() {
		c.pw.Close()
		<-c.done
	})
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

func check(events map[string]*openapi3.Schema, event, data, what string, report func(string, ...any)) {
	s, ok := events[event]
	if !ok {
		report("openapi: %s sent the event %q, which the document does not name", what, event)
		return
	}
	var v any
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		report("openapi: %s sent the event %q with data that is not JSON: %.200q", what, event, data)
		return
	}
	if err := s.VisitJSON(v, openapi3.MultiErrors()); err != nil {
		report("openapi: %s sent the event %q whose data does not match the document: %v", what, event, err)
	}
}

// reporter reports mismatches to a test while it runs (and to stderr once
// it has ended: a late answer must not panic the test binary).
type reporter struct {
	t    testing.TB
	mu   sync.Mutex
	done bool
}

func (r *reporter) report(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		fmt.Fprintf(os.Stderr, "%s: "+format+"\n", append([]any{r.t.Name()}, args...)...)
		return
	}
	r.t.Errorf(format, args...)
}

func (r *reporter) end() {
	r.mu.Lock()
	r.done = true
	r.mu.Unlock()
}

// ValidatingClient is an HTTP client whose traffic is checked against the
// API's OpenAPI document (see validatingTransport), failing t on a
// mismatch. checkRequests: also the requests (a typed client's; a test
// that sends malformed requests on purpose leaves it off).
func ValidatingClient(t testing.TB, checkRequests bool) *http.Client {
	r := &reporter{t: t}
	t.Cleanup(r.end)
	return &http.Client{Transport: &validatingTransport{
		base: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     90 * time.Second,
		},
		checkRequests: checkRequests,
		report:        r.report,
	}}
}
