package sidecar

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// compositionRoot are the files of package sidecar that may import the
// packages the domain drives and the engines' adapters: they build them
// and hand them to the domain. Every other file is the HTTP adapter, which
// speaks only the domain (sidecar/workspace) and the API's wire types
// (sidecar/client).
var compositionRoot = map[string]string{
	"service.go": "the composition root: it builds the engine (container), the disks, images, templates' builder and the git store (worktree) and wires them into the domain",
	"config.go":  "the Service's configuration, defaults from the adapters it configures (image.DefaultTag)",
	"network.go": "the network boundary, an adapter of the domain's Network on the Docker engine (container) and the egress proxy, built by service.go",
}

// adapterImports are what the HTTP adapter must not import: the packages
// the domain drives (the agent and its protocol, sessions, git), the
// engines and their adapters, and Docker's. An entry ending in "/" is a
// prefix; any other is a package and those under it.
var adapterImports = []string{
	"github.com/patina-dev/patina/session",
	"github.com/patina-dev/patina/worktree",
	"github.com/patina-dev/patina/sidecar/agent",
	"github.com/patina-dev/patina/sidecar/container",
	"github.com/patina-dev/patina/sidecar/engine",
	"github.com/patina-dev/patina/sidecar/disk",
	"github.com/patina-dev/patina/sidecar/image",
	"github.com/patina-dev/patina/sidecar/egress",
	"github.com/patina-dev/patina/sidecar/template/builder",
	"github.com/docker/", "github.com/moby/", "github.com/containerd/", "github.com/opencontainers/",
}

// TestHandlersImportOnlyTheDomain fails when a file of package sidecar
// other than the composition root's imports what the domain drives or an
// engine: the handlers take the domain's values and errors, never those
// of the packages behind it.
func TestHandlersImportOnlyTheDomain(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		if _, ok := compositionRoot[name]; ok {
			continue
		}
		checked++
		for _, imp := range fileImports(t, name) {
			for _, bad := range adapterImports {
				if forbidden(bad, imp) {
					t.Errorf("%s imports %s: the HTTP adapter speaks the domain's values and errors (sidecar/workspace) and the wire types (sidecar/client) only", name, imp)
				}
			}
		}
	}
	if checked < 10 {
		t.Fatalf("checked only %d files: the walk is broken", checked)
	}
	for name := range compositionRoot {
		if _, err := os.Stat(name); err != nil {
			t.Errorf("composition root file %s: %v (update the allow-list)", name, err)
		}
	}
}

func fileImports(t *testing.T, name string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range f.Imports {
		p, err := strconv.Unquote(s.Path.Value)
		if err != nil {
			t.Fatalf("%s: import %s: %v", name, s.Path.Value, err)
		}
		out = append(out, p)
	}
	return out
}

// forbidden reports whether the entry bad of adapterImports covers imp.
func forbidden(bad, imp string) bool {
	if strings.HasSuffix(bad, "/") {
		return strings.HasPrefix(imp, bad)
	}
	return imp == bad || strings.HasPrefix(imp, bad+"/")
}
