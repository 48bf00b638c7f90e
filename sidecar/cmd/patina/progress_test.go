package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestProgressLine(t *testing.T) {
	var buf bytes.Buffer
	done := progressLine(&buf, "forking demo", time.Now)
	done()
	out := buf.String()
	if !strings.Contains(out, "forking demo… 0s") || !strings.HasSuffix(out, "\r\033[K") {
		t.Fatalf("exp the line drawn, then cleared; got %q", out)
	}
}

// Not on a terminal (a pipe, CI): a fork prints no progress at all.
func TestProgressQuietOffTerminal(t *testing.T) {
	f := newFakeSidecar(t)
	r := runCLI(t, f.env(), "", "ws", "fork", "demo", "--name", "b")
	if strings.Contains(r.stderr, "forking") || strings.Contains(r.stderr, "\r") {
		t.Fatalf("exp no progress off a terminal, stderr %q", r.stderr)
	}
}
