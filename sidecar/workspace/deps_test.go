package workspace

import (
	"go/build"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/patina-dev/patina"

// engineImports are packages of a container engine or its adapters: the
// domain reaches an engine only through the Engine interface and
// sidecar/engine's values.
var engineImports = []string{
	"github.com/docker/", "github.com/moby/", "github.com/containerd/", "github.com/opencontainers/",
	module + "/sidecar/container", module + "/sidecar/template/builder", module + "/sidecar/image",
}

// TestImportsNoEnginePackage fails when sidecar/workspace, or a package of
// this module it depends on, imports an engine's package.
func TestImportsNoEnginePackage(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var walk func(pkg string, chain string)
	walk = func(pkg, chain string) {
		if seen[pkg] {
			return
		}
		seen[pkg] = true
		dir := filepath.Join(root, filepath.FromSlash(strings.TrimPrefix(pkg, module)))
		p, err := build.Default.ImportDir(dir, 0)
		if err != nil {
			t.Fatalf("%s: %v", pkg, err)
		}
		for _, imp := range p.Imports {
			for _, bad := range engineImports {
				if imp == bad || strings.HasPrefix(imp, bad) && (strings.HasSuffix(bad, "/") || strings.HasPrefix(imp, bad+"/")) {
					t.Errorf("%s imports %s: the domain must not depend on an engine", chain, imp)
				}
			}
			if strings.HasPrefix(imp, module+"/") {
				walk(imp, chain+" → "+imp)
			}
		}
	}
	walk(module+"/sidecar/workspace", "sidecar/workspace")
	if len(seen) < 5 {
		t.Fatalf("walked only %d packages: the walk is broken", len(seen))
	}
}
