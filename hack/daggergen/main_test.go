package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestIsGenerated(t *testing.T) {
	for path, exp := range map[string]bool{
		"dagger.gen.go":                 true,
		"internal/dagger/dagger.gen.go": true,
		"internal/dagger/dep.gen.go":    true,
		"internal/dagger/README":        false,
		"main.go":                       false,
		"internal/daggerx/a.go":         false,
		"sub/dagger.gen.go":             false,
		"go.mod":                        false,
	} {
		if got := isGenerated(path); got != exp {
			t.Errorf("%s: exp %v, got %v", path, exp, got)
		}
	}
}

func TestDiff(t *testing.T) {
	have := map[string][]byte{"a": []byte("1\n2\n3\n"), "b": []byte("x"), "old": []byte("y")}
	want := map[string][]byte{"a": []byte("1\n2\nthree\n"), "b": []byte("x"), "new": []byte("z")}
	exp := []string{
		"changed: a (first difference at line 3)",
		"missing: new",
		"stale:   old",
	}
	if got := diff(have, want); !slices.Equal(exp, got) {
		t.Errorf("exp %q, got %q", exp, got)
	}
	if got := diff(want, want); len(got) != 0 {
		t.Errorf("identical: exp no difference, got %q", got)
	}
}

func TestCopyModuleLeavesOutGeneratedAndForeign(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	for _, f := range []string{
		"go.mod", "main.go", "dagger.gen.go", "internal/dagger/dagger.gen.go",
		"internal/pipeline/p.go", ".git/HEAD", "hack/tool/go.mod", "hack/tool/main.go",
		"sub/dagger.gen.go",
	} {
		p := filepath.Join(src, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := copyModule(src, dst); err != nil {
		t.Fatal(err)
	}
	var got []string
	filepath.WalkDir(dst, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dst, p)
			got = append(got, filepath.ToSlash(rel))
		}
		return err
	})
	exp := []string{"go.mod", "internal/pipeline/p.go", "main.go", "sub/dagger.gen.go"}
	if !slices.Equal(exp, got) {
		t.Errorf("exp %q, got %q", exp, got)
	}
}

func TestFindRoot(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "dagger.json"), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(root, "hack", "daggergen")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(sub)
	got, err := findRoot("")
	if err != nil {
		t.Fatal(err)
	}
	if exp, _ := filepath.EvalSymlinks(root); got != exp && got != root {
		t.Errorf("exp %s, got %s", root, got)
	}
	if _, err := findRoot(sub); err == nil {
		t.Error("-root without dagger.json: exp an error")
	}
}
