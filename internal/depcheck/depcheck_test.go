package depcheck

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestFind(t *testing.T) {
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	// internal/depcheck imports go/build: found directly.
	found, walked, err := Find(root, Module+"/internal/depcheck", []string{"go/build"})
	if err != nil || walked != 1 || len(found) != 1 || !strings.Contains(found[0], "imports go/build") {
		t.Fatalf("Find = %q, %d, %v", found, walked, err)
	}
	// An entry ending in "$" is that package alone, not those under it.
	for _, c := range []struct {
		bad, imp string
		want     bool
	}{
		{"a/b$", "a/b", true}, {"a/b$", "a/b/c", false}, {"a/b$", "a/bc", false},
		{"a/b", "a/b", true}, {"a/b", "a/b/c", true}, {"a/b", "a/bc", false},
		{"a/", "a/b", true}, {"a/", "a", false},
	} {
		if got := forbids(c.bad, c.imp); got != c.want {
			t.Errorf("forbids(%q, %q) = %v, want %v", c.bad, c.imp, got, c.want)
		}
	}
	// Through a package of the module: sidecar/engine imports errors only.
	found, _, err = Find(root, Module+"/sidecar/engine", []string{"go/"})
	if err != nil || len(found) != 0 {
		t.Fatalf("Find = %q, %v", found, err)
	}
}
