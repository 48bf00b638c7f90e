package pipeline

import (
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// pinned is "name:tag@sha256:<64 hex>": a readable tag and the digest that
// is actually pulled.
var pinned = regexp.MustCompile(`^[a-z0-9./-]+:[A-Za-z0-9._-]+@sha256:[0-9a-f]{64}$`)

func TestImagesArePinned(t *testing.T) {
	for _, img := range []string{GoImage, RuntimeImage} {
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

func TestDefaultImages(t *testing.T) {
	exp := Images{Go: GoImage, Runtime: RuntimeImage}
	if got := DefaultImages(); got != exp {
		t.Errorf("exp %+v, got %+v", exp, got)
	}
	if err := DefaultImages().Validate(); err != nil {
		t.Errorf("the pinned images: exp valid, got %v", err)
	}
}

func TestImagesWithDefaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Images
		exp  Images
	}{
		{"none given", Images{}, DefaultImages()},
		{"go only", Images{Go: "mirror.example/golang:1.26"},
			Images{Go: "mirror.example/golang:1.26", Runtime: RuntimeImage}},
		{"all given", Images{Go: "a", Runtime: "b"}, Images{Go: "a", Runtime: "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.in.WithDefaults(); got != tc.exp {
				t.Errorf("exp %+v, got %+v", tc.exp, got)
			}
		})
	}
}

func TestImagesValidate(t *testing.T) {
	ok := DefaultImages()
	for _, tc := range []struct {
		name string
		in   Images
		flag string // "" when valid
	}{
		{"pinned", ok, ""},
		{"a local registry's digest", Images{Go: "172.17.0.1:5000/library/golang:1.26.8-bookworm@sha256:" + strings.Repeat("a", 64), Runtime: ok.Runtime}, ""},
		{"tag only", Images{Go: "golang:1.26.8-bookworm", Runtime: "debian:bookworm-slim"}, ""},
		{"empty go image", Images{Runtime: ok.Runtime}, "--go-image"},
		{"upper case", Images{Go: ok.Go, Runtime: "Debian:12"}, "--runtime-image"},
		{"space", Images{Go: ok.Go, Runtime: "debian:12 slim"}, "--runtime-image"},
		{"short digest", Images{Go: "golang@sha256:abc", Runtime: ok.Runtime}, "--go-image"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.in.Validate()
			switch {
			case tc.flag == "" && err != nil:
				t.Errorf("exp valid, got %v", err)
			case tc.flag != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.flag+" ")):
				t.Errorf("exp an error naming %s, got %v", tc.flag, err)
			}
		})
	}
}

// TestUnresolvedImageError checks that an image the engine cannot resolve is
// reported with its flag, the reference, the engine's answer and the way
// out, and keeps the engine's error for errors.Is.
func TestUnresolvedImageError(t *testing.T) {
	cause := errors.New("golang:1.26.8-bookworm@sha256:a688: not found")
	err := error(&UnresolvedImageError{Flag: "--go-image", Ref: GoImage, Err: cause})
	msg := err.Error()
	for _, want := range []string{"--go-image " + GoImage + ":", "not found", "give --go-image a reference", "README \"Images\""} {
		if !strings.Contains(msg, want) {
			t.Errorf("exp %q in %q", want, msg)
		}
	}
	if !errors.Is(err, cause) {
		t.Error("the engine's error is not wrapped")
	}
}
