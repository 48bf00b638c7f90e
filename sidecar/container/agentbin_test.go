package container

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patina-dev/patina/sidecar/agent/wire"
)

// On Linux the agent is this executable; elsewhere a Linux build beside
// it, named for the architecture, or an error that says how to make it.
func TestDefaultAgentBinary(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	exe := filepath.Join(dir, "patina")
	if got, why, err := defaultAgentBinary(ctx, "linux", "amd64", exe, ""); err != nil || why != nil || got != exe {
		t.Fatalf("linux: exp %s, got %q %v %v", exe, got, why, err)
	}
	_, _, err := defaultAgentBinary(ctx, "darwin", "arm64", exe, "")
	if err == nil || !strings.Contains(err.Error(), "GOOS=linux GOARCH=arm64 go build -o "+filepath.Join(dir, "patina-linux-arm64")) || !strings.Contains(err.Error(), "--agent-binary") {
		t.Fatalf("darwin without a Linux build: exp how to make one, got %v", err)
	}
	want := filepath.Join(dir, "patina-linux-arm64")
	if err := os.WriteFile(want, []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, _, err := defaultAgentBinary(ctx, "darwin", "arm64", exe, ""); err != nil || got != want {
		t.Fatalf("darwin: exp %s, got %q %v", want, got, err)
	}
}

// On Linux a patina-agent beside the executable is shipped instead when
// it speaks this sidecar's protocol; one that does not, or does not run,
// is passed over, saying why. (Scripts stand in for patina-agent here:
// the real one is run by TestSlimAgentIsDefault in tests/.)
func TestDefaultAgentBinarySlim(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name, script, why string
		mode              os.FileMode
	}{
		{"speaks this protocol", fmt.Sprintf("echo patina-agent v1.2 protocol %d", wire.ProtocolVersion), "", 0o755},
		{"another protocol", "echo patina-agent v0.1 protocol 1", "speaks protocol 1, this sidecar", 0o755},
		{"no version command", "echo 'unknown command' >&2; exit 2", "rebuild it with this patina", 0o755},
		{"something else", "echo hello", "not patina-agent's", 0o755},
		{"not executable", "echo patina-agent x protocol 2", "not an executable file", 0o644},
		{"another release", fmt.Sprintf("echo patina-agent v1.1 protocol %d", wire.ProtocolVersion), "is version v1.1, this sidecar v1.2", 0o755},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			exe := filepath.Join(dir, "patina")
			slim := filepath.Join(dir, SlimAgentName)
			if err := os.WriteFile(slim, []byte("#!/bin/sh\n"+c.script+"\n"), c.mode); err != nil {
				t.Fatal(err)
			}
			got, why, err := defaultAgentBinary(ctx, "linux", "amd64", exe, "v1.2")
			if err != nil {
				t.Fatal(err)
			}
			if c.why == "" {
				if got != slim || why != nil {
					t.Fatalf("exp %s, got %q (%v)", slim, got, why)
				}
				return
			}
			if got != exe || why == nil || !strings.Contains(why.Error(), c.why) || !strings.Contains(why.Error(), slim) {
				t.Fatalf("exp %s and why %q naming %s, got %q (%v)", exe, c.why, slim, got, why)
			}
		})
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
