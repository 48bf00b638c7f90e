package inside

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The container's git identity: set where missing, kept where the image
// has one, in a real git system config.
func TestGitIdentity(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is needed: %v", err)
	}
	get := func(key string) string {
		out, _ := exec.Command("git", "config", "--system", "--get", key).Output()
		return strings.TrimSpace(string(out))
	}
	log := slog.New(slog.DiscardHandler)
	cfg := filepath.Join(t.TempDir(), "gitconfig")
	t.Setenv("GIT_CONFIG_SYSTEM", cfg)

	gitIdentity(context.Background(), "patina", "patina@localhost", log)
	if n, e := get("user.name"), get("user.email"); n != "patina" || e != "patina@localhost" {
		t.Fatalf("a fresh config: user.name %q, user.email %q", n, e)
	}

	if err := os.WriteFile(cfg, []byte("[user]\n\tName = Image Owner\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIdentity(context.Background(), "patina", "patina@localhost", log)
	if n, e := get("user.name"), get("user.email"); n != "Image Owner" || e != "patina@localhost" {
		t.Fatalf("an image's own name: user.name %q, user.email %q", n, e)
	}
}
