package main

import (
	"bytes"
	"fmt"
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

// A build's progress on a terminal is its latest line, rewritten in place
// and cut; off one, nothing; its last lines are kept for a failure.
func TestBuildTail(t *testing.T) {
	var buf bytes.Buffer
	b := newBuildTail(&buf, true, "building the template")
	for i := range 30 {
		fmt.Fprintf(b, "Step %d/30 : RUN echo %s\r\n", i+1, strings.Repeat("x", i*10))
	}
	b.Write([]byte("partial \x1b[31mred"))
	b.Close()
	out := buf.String()
	if !strings.Contains(out, "\r\033[Kbuilding the template: Step 30/30 : RUN echo xxx") || !strings.HasSuffix(out, "\r\033[K") {
		t.Fatalf("exp the latest line shown, then cleared; got %q", out)
	}
	for _, l := range strings.Split(out, "\r\033[K") {
		if n := len([]rune(strings.TrimPrefix(l, "building the template: "))); n > maxShown {
			t.Fatalf("a shown line of %d runes: %q", n, l)
		}
	}
	tail := b.Tail()
	if len(tail) != tailKeep || tail[len(tail)-1] != "Step 30/30 : RUN echo "+strings.Repeat("x", 290) {
		t.Fatalf("exp the last %d lines kept, got %d ending %q", tailKeep, len(tail), tail[len(tail)-1])
	}
	buf.Reset()
	off := newBuildTail(&buf, false, "building")
	fmt.Fprintln(off, "Step 1/2 : FROM patina/base:bookworm")
	off.Close()
	if buf.Len() != 0 || len(off.Tail()) != 1 {
		t.Fatalf("exp nothing shown off a terminal, got %q", buf.String())
	}
}

// WS:PATH is a workspace's file; a path with a slash before its colon is
// local.
func TestRemoteArg(t *testing.T) {
	for in, exp := range map[string][3]string{
		"demo:a/b.txt":   {"demo", "a/b.txt", "true"},
		"demo:":          {"demo", "", "true"},
		"./a:b":          {"", "", "false"},
		"/tmp/x:y":       {"", "", "false"},
		"plain.txt":      {"", "", "false"},
		":nothing":       {"", "", "false"},
		"3f2a9c01:x/y:z": {"3f2a9c01", "x/y:z", "true"},
	} {
		ws, p, ok := remoteArg(in)
		if [3]string{ws, p, fmt.Sprint(ok)} != exp {
			t.Errorf("%q: exp %v, got %q %q %v", in, exp, ws, p, ok)
		}
	}
	if got := transferred(3<<20, 12<<20); got != "3.0 MiB of 12 MiB (25%)" {
		t.Errorf("transferred: %q", got)
	}
}
