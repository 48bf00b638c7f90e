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
	// Through a package of the module: sidecar/engine imports errors only.
	found, _, err = Find(root, Module+"/sidecar/engine", []string{"go/"})
	if err != nil || len(found) != 0 {
		t.Fatalf("Find = %q, %v", found, err)
	}
}
