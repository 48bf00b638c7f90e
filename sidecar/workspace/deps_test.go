package workspace

import (
	"path/filepath"
	"testing"

	"github.com/patina-dev/patina/internal/depcheck"
)

// TestImportsNoEnginePackage fails when sidecar/workspace, or a package of
// this module it depends on, imports an engine's package or an adapter of
// one: the domain reaches an engine only through the Engine interface and
// sidecar/engine's values.
func TestImportsNoEnginePackage(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	const m = depcheck.Module
	found, walked, err := depcheck.Find(root, m+"/sidecar/workspace", []string{
		"github.com/docker/", "github.com/moby/", "github.com/containerd/", "github.com/opencontainers/",
		m + "/sidecar/container", m + "/sidecar/template/builder", m + "/sidecar/image",
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Errorf("%s: the domain must not depend on an engine", f)
	}
	if walked < 5 {
		t.Fatalf("walked only %d packages: the walk is broken", walked)
	}
}

// TestImportsNoAPIPackage fails when sidecar/workspace, or a package of
// this module it depends on, imports the HTTP API's package (its wire
// types and client) or the HTTP adapter: the domain speaks its own values
// (Info, CreateRequest ...), which the adapter translates once
// (sidecar/wire_workspace.go).
func TestImportsNoAPIPackage(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	const m = depcheck.Module
	found, walked, err := depcheck.Find(root, m+"/sidecar/workspace", []string{
		m + "/sidecar/client", m + "/sidecar$", m + "/sidecar/mcp",
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Errorf("%s: the domain must not depend on the API's types", f)
	}
	if walked < 5 {
		t.Fatalf("walked only %d packages: the walk is broken", walked)
	}
}
