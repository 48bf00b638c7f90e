package main

import (
	"strings"
	"testing"
)

// secret set takes the header whole, or its value from stdin (never on
// the command line), and prints no value.
func TestSecretSet(t *testing.T) {
	f := newFakeSidecar(t)
	r := runCLI(t, f.env(), "", "secret", "set", "GH", "--host", "api.github.com", "--header", "Authorization: Bearer on-the-line")
	if r.code != 0 || r.stdout != "secret GH: Authorization for api.github.com\n" {
		t.Fatalf("exp it set, got %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, f.env(), "Bearer from-stdin-123\n", "secret", "set", "NPM", "--host", "registry.npmjs.org", "--host", "*.npmjs.org", "--header", "Authorization", "--stdin")
	if r.code != 0 || strings.Contains(r.stdout+r.stderr, "from-stdin") {
		t.Fatalf("exp it set without showing the value, got %d %q %q", r.code, r.stdout, r.stderr)
	}
	f.mu.Lock()
	got := f.secretReqs["NPM"]
	f.mu.Unlock()
	if got.Header != "Authorization: Bearer from-stdin-123" || strings.Join(got.Hosts, ",") != "registry.npmjs.org,*.npmjs.org" {
		t.Fatalf("exp the value from stdin, without its newline, got %+v", got)
	}
	for _, c := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"", []string{"--header", "A: b"}, "--host is required"},
		{"", []string{"--host", "a.test"}, "--header is required"},
		{"", []string{"--host", "a.test", "--header", "A"}, "want 'Name: value'"},
		{"x", []string{"--host", "a.test", "--header", "A: b", "--stdin"}, "the header's name only"},
		{"\n", []string{"--host", "a.test", "--header", "A", "--stdin"}, "empty"},
		{"a\nb", []string{"--host", "a.test", "--header", "A", "--stdin"}, "line break"},
	} {
		r := runCLI(t, f.env(), c.stdin, append([]string{"secret", "set", "X"}, c.args...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exp a usage error %q, got %d %q", c.args, c.want, r.code, r.stderr)
		}
	}
}

// A bad --secret-env never shows its value.
func TestSecretEnvFlagHidesValue(t *testing.T) {
	f := newFakeSidecar(t)
	r := runCLI(t, f.env(), "", "ws", "create", "--secret-env", "1BAD=hunter2")
	if r.code != exitUsage || strings.Contains(r.stderr, "hunter2") || !strings.Contains(r.stderr, "1BAD") {
		t.Fatalf("exp a usage error naming the key only, got %d %q", r.code, r.stderr)
	}
}
