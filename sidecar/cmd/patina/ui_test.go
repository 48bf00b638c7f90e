package main

import (
	"strings"
	"testing"
)

// patina ui prints the console's address with the one-time code in the
// fragment, and nothing else on stdout.
func TestUI(t *testing.T) {
	f := newFakeSidecar(t)
	r := runCLI(t, f.env(), "", "ui")
	if r.code != 0 {
		t.Fatalf("exp exit 0, got %d: %s", r.code, r.stderr)
	}
	exp := f.srv.URL + "/#code=c0de\n"
	if r.stdout != exp {
		t.Fatalf("exp %q, got %q", exp, r.stdout)
	}
	if !strings.Contains(strings.Join(f.calls, " "), "POST /v1/console/codes") {
		t.Fatalf("exp a code asked of the sidecar, calls %v", f.calls)
	}
}
