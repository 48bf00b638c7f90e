package main

import (
	"strings"
	"testing"

	"github.com/patina-dev/patina/sidecar/image"
	"github.com/patina-dev/patina/tests"
)

// TestImageBuildWhenPresent runs `patina image build` twice with the default
// image present, as the Quick start's "once" promises a user may: it builds
// nothing (no debootstrap line, no new tag) and says that --force would.
func TestImageBuildWhenPresent(t *testing.T) {
	tests.RequireDocker(t) // builds patina/base:bookworm when it is absent
	for i := range 2 {
		r := runCLI(t, nil, "", "image", "build")
		if r.code != 0 {
			t.Fatalf("run %d: exit %d: %s", i+1, r.code, r.stderr)
		}
		if !strings.HasPrefix(r.stdout, image.DefaultTag+" is present already (") || !strings.Contains(r.stdout, "--force builds it anew") {
			t.Errorf("run %d: exp that %s is present and how to rebuild it, got %q", i+1, image.DefaultTag, r.stdout)
		}
		if strings.Contains(r.stderr, "debootstrap") {
			t.Errorf("run %d: a build started: %q", i+1, r.stderr)
		}
	}
}

// TestImageBuildFlags checks --force's help and that it cannot be combined
// with the old --if-missing (still accepted, hidden: it is the default).
func TestImageBuildFlags(t *testing.T) {
	r := runCLI(t, nil, "", "image", "build", "--help")
	if !strings.Contains(r.stdout, "--force") || !strings.Contains(r.stdout, "--verbose") || strings.Contains(r.stdout, "--if-missing") {
		t.Errorf("help: exp --force and --verbose, not --if-missing; got %s", r.stdout)
	}
	r = runCLI(t, nil, "", "image", "build", "--force", "--if-missing")
	if r.code != exitUsage {
		t.Errorf("--force --if-missing: exp exit %d, got %d: %s", exitUsage, r.code, r.stderr)
	}
}
