package pipeline

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// pinned is "name:tag@sha256:<64 hex>": a readable tag and the digest that
// is actually pulled.
var pinned = regexp.MustCompile(`^[a-z0-9./-]+:[A-Za-z0-9._-]+@sha256:[0-9a-f]{64}$`)

func TestImagesArePinned(t *testing.T) {
	for _, img := range []string{GoImage, DindImage, RuntimeImage} {
		if !pinned.MatchString(img) {
			t.Errorf("%q: exp name:tag@sha256:<digest>", img)
		}
		if strings.Contains(img, ":latest") {
			t.Errorf("%q: floating tag", img)
		}
	}
}

func TestSidecarEntrypoint(t *testing.T) {
	exp := []string{"patina", "serve", "--addr", "0.0.0.0:7070"}
	if got := SidecarEntrypoint(); !slices.Equal(exp, got) {
		t.Errorf("exp %q, got %q", exp, got)
	}
}

func TestRuntimeInstall(t *testing.T) {
	got := RuntimeInstall()
	if len(got) != 3 || got[0] != "sh" || got[1] != "-c" {
		t.Fatalf("exp sh -c <script>, got %q", got)
	}
	for _, p := range RuntimePackages() {
		if !strings.Contains(got[2], " "+p) {
			t.Errorf("script does not install %s: %q", p, got[2])
		}
	}
}

func TestSourceIgnoreKeepsSources(t *testing.T) {
	// Patterns without a slash are anchored at the root in Dagger's matcher;
	// a bare name must never be one of the repository's source directories.
	for _, p := range SourceIgnore() {
		switch p {
		case "sidecar", "session", "worktree", "internal", "tests", "hack", "docs", "cmd":
			t.Errorf("%q would drop sources", p)
		}
	}
	if !slices.Contains(SourceIgnore(), ".git") {
		t.Error(".git must be ignored: it is large and changes with every commit")
	}
}
