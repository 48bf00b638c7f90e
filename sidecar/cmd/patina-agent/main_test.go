package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patina-dev/patina/internal/depcheck"
	"github.com/patina-dev/patina/sidecar/agent/inside"
	"github.com/patina-dev/patina/sidecar/agent/wire"
)

// TestLinksOnlyWhatRunsInside: nothing of the sidecar or the CLI; of
// sidecar/agent, only inside and wire (not the sidecar's client itself).
func TestLinksOnlyWhatRunsInside(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	const m = depcheck.Module
	found, walked, err := depcheck.Find(root, m+"/sidecar/cmd/patina-agent", []string{
		"github.com/docker/", "github.com/moby/", "github.com/containerd/", "github.com/spf13/",
		"github.com/modelcontextprotocol/", "go.opentelemetry.io/", "dagger.io/", "google.golang.org/grpc",
		m + "/sidecar/client", m + "/sidecar/container", m + "/sidecar/workspace", m + "/sidecar/mcp",
		m + "/sidecar/agent$",
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Errorf("%s: the in-container program must not link it", f)
	}
	if walked < 3 {
		t.Fatalf("walked only %d packages: the walk is broken", walked)
	}
}

func runArgs(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(""), &out, &out)
	return code, out.String()
}

func TestUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{nil, exitUsage, "usage: patina-agent agent COMMAND"},
		{[]string{"serve"}, exitUsage, "usage:"},
		{[]string{"agent", "nope"}, exitUsage, `unknown command "nope"`},
		{[]string{"agent", "serve"}, exitUsage, "--workspace-id is required"},
		{[]string{"agent", "serve", "--bogus"}, exitUsage, "flag provided but not defined: -bogus"},
		{[]string{"agent", "serve", "-h"}, exitOK, "-workspace-id"},
		{[]string{"agent", "pause", "--once"}, exitUsage, "--once needs a patina command after --"},
		{[]string{"agent", "copy", "a"}, exitUsage, "takes 2 arguments, got 1"},
		{[]string{"agent", "check-binary", "x"}, exitUsage, "--sha256 is required"},
		{[]string{"agent", "version"}, exitOK, fmt.Sprintf("patina-agent dev protocol %d\n", wire.ProtocolVersion)},
		{[]string{"agent", "version", "x"}, exitUsage, "takes 0 arguments, got 1"},
	} {
		code, out := runArgs(t, c.args...)
		if code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("%q: exit %d, %q; want %d and %q", c.args, code, out, c.code, c.want)
		}
	}
}

func TestCopyAndCheckBinary(t *testing.T) {
	from, to := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(from, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(from, "d", "f"), []byte("hello"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(from, "link")); err != nil {
		t.Fatal(err)
	}
	if code, out := runArgs(t, "agent", "copy", from, to); code != exitOK {
		t.Fatalf("copy: exit %d: %s", code, out)
	}
	if b, err := os.ReadFile(filepath.Join(to, "d", "f")); err != nil || string(b) != "hello" {
		t.Fatalf("copied file: %q, %v", b, err)
	}
	if l, err := os.Readlink(filepath.Join(to, "link")); err != nil || l != "/etc/passwd" {
		t.Fatalf("the link was not copied as a link: %q, %v", l, err)
	}

	file := filepath.Join(from, "d", "f")
	sum := sha256.Sum256([]byte("hello"))
	good := hex.EncodeToString(sum[:])
	other := strings.Repeat("0", 64)
	if code, out := runArgs(t, "agent", "check-binary", "--sha256", good, file); code != exitOK {
		t.Fatalf("check-binary of the right file: exit %d: %s", code, out)
	}
	if code, _ := runArgs(t, "agent", "check-binary", "--sha256", other, file); code != inside.ExitBinaryDiffers {
		t.Fatalf("check-binary of another file: exit %d, want %d", code, inside.ExitBinaryDiffers)
	}
	if code, _ := runArgs(t, "agent", "check-binary", "--sha256", good, filepath.Join(from, "absent")); code != inside.ExitBinaryMissing {
		t.Fatalf("check-binary of no file: exit %d, want %d", code, inside.ExitBinaryMissing)
	}
}
