package secrets

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func openTestVault(t *testing.T, dir string) *Vault {
	t.Helper()
	v, err := Open(Config{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestSetValidates(t *testing.T) {
	v := openTestVault(t, t.TempDir())
	for _, tc := range []struct {
		name string
		req  SetRequest
	}{
		{"name with a dash", SetRequest{Name: "GH-TOKEN", Hosts: []string{"api.github.com"}, Header: "Authorization: x"}},
		{"name starting with a digit", SetRequest{Name: "1GH", Hosts: []string{"api.github.com"}, Header: "Authorization: x"}},
		{"patina's own name", SetRequest{Name: "PATINA_X", Hosts: []string{"api.github.com"}, Header: "Authorization: x"}},
		{"a trust variable", SetRequest{Name: "SSL_CERT_FILE", Hosts: []string{"api.github.com"}, Header: "Authorization: x"}},
		{"no host", SetRequest{Name: "GH", Header: "Authorization: x"}},
		{"an address", SetRequest{Name: "GH", Hosts: []string{"10.0.0.5"}, Header: "Authorization: x"}},
		{"a port", SetRequest{Name: "GH", Hosts: []string{"api.github.com:443"}, Header: "Authorization: x"}},
		{"a bare wildcard", SetRequest{Name: "GH", Hosts: []string{"*.com"}, Header: "Authorization: x"}},
		{"no colon", SetRequest{Name: "GH", Hosts: []string{"api.github.com"}, Header: "Authorization"}},
		{"no value", SetRequest{Name: "GH", Hosts: []string{"api.github.com"}, Header: "Authorization:  "}},
		{"a bad header name", SetRequest{Name: "GH", Hosts: []string{"api.github.com"}, Header: "Auth orization: x"}},
		{"a newline", SetRequest{Name: "GH", Hosts: []string{"api.github.com"}, Header: "Authorization: x\r\nX-Evil: 1"}},
		{"Host", SetRequest{Name: "GH", Hosts: []string{"api.github.com"}, Header: "host: evil.test"}},
		{"Transfer-Encoding", SetRequest{Name: "GH", Hosts: []string{"api.github.com"}, Header: "Transfer-Encoding: chunked"}},
		{"too long", SetRequest{Name: "GH", Hosts: []string{"api.github.com"}, Header: "Authorization: " + strings.Repeat("x", maxValueLen+1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := v.Set(tc.req); !errors.Is(err, ErrInvalid) {
				t.Fatalf("exp ErrInvalid, got %v", err)
			}
		})
	}
	if len(v.List()) != 0 {
		t.Fatalf("a refused secret was kept: %v", v.List())
	}
}

// A secret is kept 0600 across a restart; no read gives its value.
func TestSetPersistsPrivately(t *testing.T) {
	dir := t.TempDir()
	v := openTestVault(t, dir)
	const value = "Bearer ghp_0123456789abcdef"
	info, err := v.Set(SetRequest{Name: "GH", Hosts: []string{"API.GitHub.com", "*.githubusercontent.com", "api.github.com"}, Header: "authorization: " + value})
	if err != nil {
		t.Fatal(err)
	}
	if exp := []string{"api.github.com", "*.githubusercontent.com"}; strings.Join(info.Hosts, ",") != strings.Join(exp, ",") || info.Header != "Authorization" {
		t.Fatalf("exp hosts %v and header Authorization, got %+v", exp, info)
	}
	fi, err := os.Stat(filepath.Join(dir, "secrets.json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("exp secrets.json 0600, got %v %v", fi, err)
	}
	v2 := openTestVault(t, dir)
	got, err := v2.Get("GH")
	if err != nil || got.Header != "Authorization" || len(got.Hosts) != 2 {
		t.Fatalf("after a restart: %+v %v", got, err)
	}
	if s, ok := v2.store.get("GH"); !ok || s.Value != value {
		t.Fatalf("after a restart: the value is not the one set: %+v", s)
	}
	if !v2.Redactor().hides(value) || !v2.Redactor().hides("ghp_0123456789abcdef") {
		t.Fatal("a stored secret's value is not hidden from logs after a restart")
	}
	if err := v2.Delete("GH"); err != nil {
		t.Fatal(err)
	}
	if _, err := v2.Get("GH"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("exp the deleted secret gone, got %v", err)
	}
	if err := v2.Delete("GH"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("exp ErrNotFound deleting it again, got %v", err)
	}
	if v2.Redactor().hides(value) {
		t.Fatal("a deleted secret's value is still redacted")
	}
	if len(openTestVault(t, dir).List()) != 0 {
		t.Fatal("a deleted secret came back after a restart")
	}
}

func TestSecretMatches(t *testing.T) {
	s := Secret{Hosts: []string{"api.github.com", "*.example.com"}}
	for host, exp := range map[string]bool{
		"api.github.com": true, "github.com": false, "x.api.github.com": false,
		"a.example.com": true, "a.b.example.com": true, "example.com": false, "badexample.com": false,
	} {
		if got := s.matches(host); got != exp {
			t.Errorf("%s: exp %v, got %v", host, exp, got)
		}
	}
}
