package sidecar

import (
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/patina-dev/patina/sidecar/console"
)

// TestPreviewLocation: a workspace's redirect stays within its own preview
// (however a browser would read it), and anywhere else is refused.
func TestPreviewLocation(t *testing.T) {
	const prefix, addr = "/preview/w/3000", "127.0.0.1:41234"
	good := map[string]string{
		"/login":                           prefix + "/login",
		"next?a=1":                         prefix + "/app/next?a=1",
		"../../../../v1/workspaces":        prefix + "/v1/workspaces",
		"http://127.0.0.1:41234/x#frag":    prefix + "/x#frag",
		"?q=1":                             prefix + "/app/page?q=1",
		" /sp":                             prefix + "/sp",
		"/a%2Fb":                           prefix + "/a%2Fb",
		"HTTP://127.0.0.1:41234/up":        prefix + "/up",
		"/tab\tbed":                        prefix + "/tabbed",
		"http://127.0.0.1:41234":           prefix + "/",
		"http://127.0.0.1:41234/?next=/v1": prefix + "/?next=/v1",
	}
	for loc, exp := range good {
		got, err := previewLocation(loc, prefix, addr, "/app/page")
		if err != nil || got != exp {
			t.Errorf("Location %q: exp %q, got %q %v", loc, exp, got, err)
		}
	}
	for _, loc := range []string{
		"http://evil.example/", "//evil.example/", "\\\\evil.example/", "/\\/evil.example", "/\\evil.example/", "///evil.example",
		"\t//evil.example", "https://127.0.0.1:41234/", "http://127.0.0.1:7070/", "http://u@127.0.0.1:41234/",
		"javascript:alert(1)", "data:text/html,x", "http://[::1",
	} {
		if got, err := previewLocation(loc, prefix, addr, "/app/page"); !errors.Is(err, errPreviewRedirect) {
			t.Errorf("Location %q: exp refused, got %q %v", loc, got, err)
		}
	}
}

// TestConsoleCodeNeedsToken: a browser key cannot mint sign-in codes
// (each would become a fresh key: a key that renews itself forever).
func TestConsoleCodeNeedsToken(t *testing.T) {
	s := &Service{token: "tok", console: console.New(console.Config{Token: "tok"})}
	key := s.console.Keys().NewKey()
	for _, tc := range []struct {
		bearer string
		exp    int
	}{{"tok", 201}, {key.Key, 401}, {key.Preview, 401}, {"", 401}} {
		r := httptest.NewRequest("POST", "http://127.0.0.1:7070/v1/console/codes", nil)
		if tc.bearer != "" {
			r.Header.Set("Authorization", "Bearer "+tc.bearer)
		}
		w := httptest.NewRecorder()
		s.routes().ServeHTTP(w, r)
		if w.Code != tc.exp {
			t.Errorf("bearer %.8q: exp %d, got %d %s", tc.bearer, tc.exp, w.Code, w.Body)
		}
	}
}
