package inside

import (
	"os"
	"path/filepath"
	"testing"
)

// TestPlantSeed: a template's seed goes into the workspace's files and
// state once, whole even after a half-done try, never over what the
// workspace's own state says was planted, and leaves the workspace's own
// agent log alone.
func TestPlantSeed(t *testing.T) {
	root := t.TempDir()
	seed, work, state := filepath.Join(root, "seed"), filepath.Join(root, "workspace"), filepath.Join(root, "state")
	write := func(p, data string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	read := func(p string) string {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	makeSeed := func() {
		write(filepath.Join(seed, "workspace", "src", "main.go"), "package main\n")
		write(filepath.Join(seed, "workspace", "README"), "from the template\n")
		if err := os.Symlink("src/main.go", filepath.Join(seed, "workspace", "link")); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
		write(filepath.Join(seed, "state", "sessions", "default", "meta.json"), "{}")
		write(filepath.Join(seed, "state", "agent.log"), "the template's log\n")
	}
	if planted, err := plantSeed(seed, work, state); planted || err != nil {
		t.Fatalf("no seed: planted %v, %v", planted, err)
	}
	for _, d := range []string{work, state} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	makeSeed()
	write(filepath.Join(state, "agent.log"), "this workspace's log\n")
	// A half-done earlier try left part of a file.
	write(filepath.Join(work, "README"), "from the")
	if planted, err := plantSeed(seed, work, state); !planted || err != nil {
		t.Fatalf("plant: %v, %v", planted, err)
	}
	if got := read(filepath.Join(work, "README")); got != "from the template\n" {
		t.Fatalf("README: %q", got)
	}
	if got := read(filepath.Join(work, "src", "main.go")); got != "package main\n" {
		t.Fatalf("main.go: %q", got)
	}
	if l, err := os.Readlink(filepath.Join(work, "link")); err != nil || l != "src/main.go" {
		t.Fatalf("link: %q %v", l, err)
	}
	if got := read(filepath.Join(state, "sessions", "default", "meta.json")); got != "{}" {
		t.Fatalf("session: %q", got)
	}
	if got := read(filepath.Join(state, "agent.log")); got != "this workspace's log\n" {
		t.Fatalf("the workspace's own log was replaced: %q", got)
	}
	if _, err := os.Lstat(seed); !os.IsNotExist(err) {
		t.Fatalf("the seed is still there: %v", err)
	}
	// The workspace changes its files; a container made anew has the seed
	// again: it is not planted over them.
	write(filepath.Join(work, "README"), "the user's\n")
	makeSeed()
	if planted, err := plantSeed(seed, work, state); planted || err != nil {
		t.Fatalf("second plant: %v, %v", planted, err)
	}
	if got := read(filepath.Join(work, "README")); got != "the user's\n" {
		t.Fatalf("a second seed was planted over the workspace's files: %q", got)
	}
	if _, err := os.Lstat(seed); !os.IsNotExist(err) {
		t.Fatalf("the second seed is still there: %v", err)
	}

	// A plant that failed halfway (its files planted, its state not) is
	// not tried again over what the workspace made since; the seed's
	// files named like the agent's own are files like others.
	work2, state2 := filepath.Join(root, "workspace2"), filepath.Join(root, "state2")
	for _, d := range []string{work2, state2} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	makeSeed()
	write(filepath.Join(seed, "workspace", "agent.log.txt"), "the user's notes\n")
	if err := os.RemoveAll(filepath.Join(seed, "state")); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(seed, "state"), "not a directory")
	if planted, err := plantSeed(seed, work2, state2); planted || err == nil {
		t.Fatalf("a plant that fails: %v, %v", planted, err)
	}
	if got := read(filepath.Join(work2, "agent.log.txt")); got != "the user's notes\n" {
		t.Fatalf("agent.log.txt of the workspace's files: %q", got)
	}
	write(filepath.Join(work2, "src", "main.go"), "the user's work\n")
	makeSeed()
	if planted, err := plantSeed(seed, work2, state2); planted || err != nil {
		t.Fatalf("after a failed plant: %v, %v", planted, err)
	}
	if got := read(filepath.Join(work2, "src", "main.go")); got != "the user's work\n" {
		t.Fatalf("a seed was planted again over the workspace's files after a failed plant: %q", got)
	}
}
