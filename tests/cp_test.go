package tests

import (
	"bytes"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patina-dev/patina/sidecar/client"
)

// patina ws cp streams a file into a workspace and out of it, exact, into
// a directory under its own name; a link inside the workspace is the
// container's file, never the host's; bad forms are usage errors; a copy
// out that fails leaves nothing half-written.
func TestWsCp(t *testing.T) {
	h := Start(t)
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "cp"})
	dir := t.TempDir()
	data := make([]byte, 6<<20)
	if _, err := crand.Read(data); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, "data.bin")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	h.cli(t, 0, "ws", "cp", src, "cp:in/data.bin")
	if got := h.Out("cp", "default", "sha256sum in/data.bin | cut -d' ' -f1"); got != hex.EncodeToString(sum[:])+"\n" {
		t.Fatalf("the copy in: exp %x, got %q", sum, got)
	}
	out := t.TempDir()
	h.cli(t, 0, "ws", "cp", "cp:in/data.bin", out)
	if b, err := os.ReadFile(filepath.Join(out, "data.bin")); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("the copy out: %d bytes, %v", len(b), err)
	}
	// A link out of /workspace (to /etc/shadow) is refused, saying so, and
	// nothing is written here.
	h.Out("cp", "default", "ln -sf /etc/shadow shadow")
	if r := h.cli(t, 1, "ws", "cp", "cp:shadow", filepath.Join(out, "shadow")); !strings.Contains(r.stderr, "shadow leads out of /workspace") {
		t.Fatalf("exp the link refused in the user's terms, got %q", r.stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "shadow")); err == nil {
		t.Fatal("a refused copy wrote a file")
	}
	for _, bad := range [][]string{
		{"ws", "cp", src, filepath.Join(out, "x")}, // neither side a workspace
		{"ws", "cp", "cp:a", "cp:b"},               // both
		{"ws", "cp", src, "cp:"},                   // no path
		{"ws", "cp", dir, "cp:dir"},                // a directory
	} {
		r := h.cli(t, 2, bad...)
		if strings.Contains(r.stderr, "patina: patina") || r.stderr == "" {
			t.Fatalf("%v: exp one clear usage error, got %q", bad, r.stderr)
		}
	}
	// A file that is not there: an error in the user's terms, and nothing
	// left in the local directory.
	r := h.cli(t, 1, "ws", "cp", "cp:missing.txt", out)
	if !strings.Contains(r.stderr, "missing.txt") {
		t.Fatalf("exp the missing file named, got %q", r.stderr)
	}
	ents, _ := os.ReadDir(out)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") || e.Name() == "missing.txt" {
			t.Fatalf("a failed copy left %s", e.Name())
		}
	}
}
