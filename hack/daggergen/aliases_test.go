package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestEnumAliases(t *testing.T) {
	dir := t.TempDir()
	core := filepath.Join(dir, "core")
	if err := os.MkdirAll(core, 0o755); err != nil {
		t.Fatal(err)
	}
	src := `package core

var (
	A = Kinds.Register("STRING_KIND")
	_ = Kinds.AliasView("STRING", "STRING_KIND", view)
	_ = Other.Alias("GZIP", "Gzip")
	_ = Other.AliasView(name, "x", view) // not literals: ignored
)
`
	if err := os.WriteFile(filepath.Join(core, "x.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	test := `package core

var _ = Kinds.Alias("TEST", "ONLY")
`
	if err := os.WriteFile(filepath.Join(core, "x_test.go"), []byte(test), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := enumAliases(dir)
	if err != nil {
		t.Fatal(err)
	}
	exp := []enumAlias{{"GZIP", "Gzip"}, {"STRING", "STRING_KIND"}}
	if !slices.Equal(exp, got) {
		t.Errorf("exp %v, got %v", exp, got)
	}
}
