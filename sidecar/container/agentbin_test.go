package container

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// On Linux the agent is this executable; elsewhere a Linux build beside
// it, named for the architecture, or an error that says how to make it.
func TestDefaultAgentBinary(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "patina")
	if got, err := defaultAgentBinary("linux", "amd64", exe); err != nil || got != exe {
		t.Fatalf("linux: exp %s, got %q %v", exe, got, err)
	}
	_, err := defaultAgentBinary("darwin", "arm64", exe)
	if err == nil || !strings.Contains(err.Error(), "GOOS=linux GOARCH=arm64 go build -o "+filepath.Join(dir, "patina-linux-arm64")) || !strings.Contains(err.Error(), "--agent-binary") {
		t.Fatalf("darwin without a Linux build: exp how to make one, got %v", err)
	}
	want := filepath.Join(dir, "patina-linux-arm64")
	if err := os.WriteFile(want, []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := defaultAgentBinary("darwin", "arm64", exe); err != nil || got != want {
		t.Fatalf("darwin: exp %s, got %q %v", want, got, err)
	}
}

// A binary that is not a Linux program is refused, saying what to give.
func TestAgentBinaryNotELF(t *testing.T) {
	p := filepath.Join(t.TempDir(), "patina")
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho not a patina\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var v agentVolume
	err := v.load(p)
	if err == nil || !strings.Contains(err.Error(), "not a Linux program") || !strings.Contains(err.Error(), "--agent-binary") {
		t.Fatalf("exp a refusal naming --agent-binary, got %v", err)
	}
}
