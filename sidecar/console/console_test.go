package console

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func signIn(c *Console, body, origin string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("POST", "http://127.0.0.1:7070/console/signin", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	if origin != "" {
		r.Header.Set("Origin", origin)
	}
	w := httptest.NewRecorder()
	c.ServeHTTP(w, r)
	return w
}

func TestSignIn(t *testing.T) {
	c := New(Config{Token: "tok"})
	code, _ := c.Keys().NewCode()
	for _, tc := range []struct {
		name, body, origin string
		exp                int
	}{
		{"the token", `{"token":"tok"}`, "http://127.0.0.1:7070", 200},
		{"no origin", `{"token":"tok"}`, "", 403},
		{"another origin", `{"token":"tok"}`, "http://127.0.0.1:8080", 403},
		{"a null origin", `{"token":"tok"}`, "null", 403},
		{"wrong token", `{"token":"tok2"}`, "http://127.0.0.1:7070", 401},
		{"a code", `{"code":"` + code + `"}`, "http://127.0.0.1:7070", 200},
		{"the code again", `{"code":"` + code + `"}`, "http://127.0.0.1:7070", 401},
		{"unknown field", `{"tokenx":"tok"}`, "http://127.0.0.1:7070", 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := signIn(c, tc.body, tc.origin)
			if w.Code != tc.exp {
				t.Fatalf("exp %d, got %d %s", tc.exp, w.Code, w.Body)
			}
			hasKey := strings.Contains(w.Body.String(), `"key"`)
			if hasKey != (tc.exp == 200) {
				t.Fatalf("key in the answer: exp %v, got %s", tc.exp == 200, w.Body)
			}
			if tc.exp == 200 {
				ck := w.Result().Cookies()
				if len(ck) != 1 || !ck[0].HttpOnly || ck[0].SameSite != http.SameSiteStrictMode || ck[0].Path != PreviewPrefix {
					t.Fatalf("preview cookie: exp HttpOnly, SameSite=Strict, Path=%s; got %v", PreviewPrefix, ck)
				}
				if !c.keys.ValidPreview(ck[0].Value) {
					t.Fatal("the cookie's preview secret is not valid")
				}
				if c.keys.Valid(ck[0].Value) || strings.Contains(w.Body.String(), ck[0].Value) {
					t.Fatal("the preview cookie holds the key (a bearer)")
				}
			}
		})
	}
}

func TestKeysBoundedAndExpire(t *testing.T) {
	k := NewKeys(time.Hour, time.Minute)
	now := time.Now()
	k.now = func() time.Time { return now }
	first := k.NewKey().Key
	for range MaxKeys + 10 {
		k.NewKey()
	}
	if len(k.keys) > MaxKeys {
		t.Fatalf("exp at most %d keys, got %d", MaxKeys, len(k.keys))
	}
	if k.Valid(first) {
		t.Fatal("the oldest key outlived the bound")
	}
	g := k.NewKey()
	if !k.Valid(g.Key) || !k.ValidPreview(g.Preview) || k.Valid(g.Preview) || k.ValidPreview(g.Key) {
		t.Fatal("a key must be valid as a key only, its preview secret as a preview secret only")
	}
	now = now.Add(2 * time.Hour)
	if k.Valid(g.Key) || k.ValidPreview(g.Preview) {
		t.Fatal("an expired key or preview secret is valid")
	}
	code, _ := k.NewCode()
	now = now.Add(2 * time.Minute)
	if _, err := k.Exchange(code); err == nil {
		t.Fatal("an expired code signed in")
	}
	if k.Valid("") || k.ValidPreview("") {
		t.Fatal("the empty key is valid")
	}
	g = k.NewKey()
	k.Revoke(g.Key)
	if k.ValidPreview(g.Preview) {
		t.Fatal("a signed-out key's preview secret is valid")
	}
}

func TestPageHeaders(t *testing.T) {
	c := New(Config{Token: "tok"})
	for _, p := range []string{"/", "/console/app.js", "/console/style.css"} {
		w := httptest.NewRecorder()
		c.ServeHTTP(w, httptest.NewRequest("GET", p, nil))
		if w.Code != 200 {
			t.Fatalf("GET %s: %d", p, w.Code)
		}
		csp := w.Header().Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Fatalf("GET %s: CSP %q", p, csp)
		}
	}
	w := httptest.NewRecorder()
	c.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	if strings.Contains(w.Body.String(), "<script>") || strings.Contains(w.Body.String(), " on") && strings.Contains(w.Body.String(), "onclick") {
		t.Fatal("the page has inline script")
	}
}

func TestXtermBundle(t *testing.T) {
	lib := t.TempDir()
	must := func(p, s string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	must(filepath.Join(lib, "public/Terminal.js"), "var x = require(\"../a\");\nexports.Terminal = x;\n//# sourceMappingURL=Terminal.js.map")
	must(filepath.Join(lib, "a.js"), "module.exports = 1;")
	must(filepath.Join(lib, "a.test.js"), "TESTCODE")
	b, err := bundle(lib, "")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.Contains(s, `defs["public/Terminal"]`) || !strings.Contains(s, `defs["a"]`) || strings.Contains(s, "TESTCODE") || strings.Contains(s, "sourceMappingURL") {
		t.Fatalf("bundle:\n%s", s)
	}
	if _, err := bundle(filepath.Join(lib, "nope"), ""); err == nil {
		t.Fatal("exp ErrNoXterm for a missing directory")
	}
	c := New(Config{XtermLib: filepath.Join(lib, "nope")})
	w := httptest.NewRecorder()
	c.ServeHTTP(w, httptest.NewRequest("GET", "/console/xterm.js", nil))
	if !strings.Contains(w.Body.String(), "XTERM_MISSING") || !strings.Contains(w.Body.String(), "node-xterm") {
		t.Fatalf("missing xterm: exp a script that says what to install, got %s", w.Body)
	}
}

// TestKeyOK: a key is a bearer only for the console's own page: never from
// a page that the browser says is another (a forward on another port of
// the host is same-site), and on a WebSocket only with the console's
// Origin.
func TestKeyOK(t *testing.T) {
	c := New(Config{Token: "tok"})
	g := c.Keys().NewKey()
	for _, tc := range []struct {
		name, origin, site string
		ws, key, exp       bool
	}{
		{"the page's fetch", "", "same-origin", false, true, true},
		{"a program (no browser headers)", "", "", false, true, true},
		{"a page on a forward's port", "http://127.0.0.1:41234", "same-site", false, true, false},
		{"another site", "http://evil.example", "cross-site", false, true, false},
		{"the page's WebSocket", "http://127.0.0.1:7070", "same-origin", true, true, true},
		{"a WebSocket from a forward's port", "http://127.0.0.1:41234", "", true, true, false},
		{"a WebSocket without Origin", "", "", true, true, false},
		{"the preview secret as a bearer", "", "same-origin", false, false, false},
	} {
		r := httptest.NewRequest("GET", "http://127.0.0.1:7070/v1/workspaces", nil)
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		if tc.site != "" {
			r.Header.Set("Sec-Fetch-Site", tc.site)
		}
		bearer := g.Key
		if !tc.key {
			bearer = g.Preview
		}
		if got := c.KeyOK(r, bearer, tc.ws); got != tc.exp {
			t.Errorf("%s: exp %v, got %v", tc.name, tc.exp, got)
		}
	}
}

// TestPreviewAuthorized: the preview cookie opens previews with its secret
// only, and not for a page of another origin that the browser sends it
// from.
func TestPreviewAuthorized(t *testing.T) {
	c := New(Config{Token: "tok"})
	g := c.Keys().NewKey()
	for _, tc := range []struct {
		name, cookie, origin, site string
		exp                        bool
	}{
		{"a link from the console", g.Preview, "", "same-origin", true},
		{"typed in the address bar", g.Preview, "", "none", true},
		{"the preview's own sandboxed page", g.Preview, "null", "cross-site", true},
		{"the key in the cookie", g.Key, "", "same-origin", false},
		{"a page on a forward's port", g.Preview, "", "same-site", false},
		{"a fetch from a forward's port", g.Preview, "http://127.0.0.1:41234", "", false},
		{"no cookie", "", "", "", false},
	} {
		r := httptest.NewRequest("GET", "http://127.0.0.1:7070/preview/w/3000/", nil)
		if tc.cookie != "" {
			r.AddCookie(&http.Cookie{Name: PreviewCookie, Value: tc.cookie})
		}
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		if tc.site != "" {
			r.Header.Set("Sec-Fetch-Site", tc.site)
		}
		if got := c.PreviewAuthorized(r); got != tc.exp {
			t.Errorf("%s: exp %v, got %v", tc.name, tc.exp, got)
		}
	}
}
