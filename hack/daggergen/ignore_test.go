package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/dagger/dagger/util/patternmatcher"
)

// TestModuleIgnoreKeepsSources checks the root module's +ignore list with the
// matcher dagger itself uses: it must drop what it means to drop and keep
// every source file. (A gitignore-style reading of the bare "patina" would
// also drop sidecar/cmd/patina; dagger's matcher anchors it at the root.)
func TestModuleIgnoreKeepsSources(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "main.go"))
	if err != nil {
		t.Skipf("root main.go not found: %v", err)
	}
	m := regexp.MustCompile(`(?m)^\s*// \+ignore=(\[.*\])\s*$`).FindSubmatch(src)
	if m == nil {
		t.Fatal("no +ignore pragma in main.go")
	}
	var patterns []string
	if err := json.Unmarshal(m[1], &patterns); err != nil {
		t.Fatal(err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatal(err)
	}
	for path, exp := range map[string]bool{
		".git/HEAD":                     true,
		"patina":                        true,
		"sidecar/sidecar.test":          true,
		"cover.out":                     true,
		"docs/.DS_Store":                true,
		"main.go":                       false,
		"go.mod":                        false,
		"dagger.json":                   false,
		"sidecar/cmd/patina/main.go":    false,
		"internal/dagger/dagger.gen.go": false,
		"hack/daggergen/main.go":        false,
		"tests/dagger_test.go":          false,
	} {
		got, err := pm.MatchesOrParentMatches(path)
		if err != nil {
			t.Fatal(err)
		}
		if got != exp {
			t.Errorf("%s: exp ignored=%v, got %v", path, exp, got)
		}
	}
}
