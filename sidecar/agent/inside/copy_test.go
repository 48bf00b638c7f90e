package inside

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// CopyTree copies files, directories, links (as links, even dangling or
// pointing out of the tree) and FIFOs (without opening them), with modes
// and times, and never writes through a link.
func TestCopyTree(t *testing.T) {
	from, to := t.TempDir(), t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(from, "d/e"), 0o750))
	must(os.WriteFile(filepath.Join(from, "d/e/f"), []byte("data"), 0o640))
	must(os.WriteFile(filepath.Join(from, "x"), []byte{0, 1, 2, 255}, 0o755))
	must(os.Symlink("/etc/passwd", filepath.Join(from, "out")))
	must(os.Symlink("nowhere", filepath.Join(from, "dangling")))
	must(unix.Mkfifo(filepath.Join(from, "fifo"), 0o600))
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	must(os.Chtimes(filepath.Join(from, "x"), old, old))

	done := make(chan error, 1)
	go func() { done <- CopyTree(from, to) }()
	select {
	case err := <-done:
		must(err)
	case <-time.After(20 * time.Second):
		t.Fatal("CopyTree hung (on the FIFO?)")
	}
	if b, err := os.ReadFile(filepath.Join(to, "d/e/f")); err != nil || string(b) != "data" {
		t.Fatalf("d/e/f: %q %v", b, err)
	}
	fi, err := os.Stat(filepath.Join(to, "x"))
	must(err)
	if fi.Mode().Perm() != 0o755 || !fi.ModTime().Equal(old) {
		t.Fatalf("x: exp mode 0755 and its time, got %v %v", fi.Mode(), fi.ModTime())
	}
	if fi, err := os.Stat(filepath.Join(to, "d")); err != nil || fi.Mode().Perm() != 0o750 {
		t.Fatalf("d: exp 0750, got %v %v", fi, err)
	}
	for name, exp := range map[string]string{"out": "/etc/passwd", "dangling": "nowhere"} {
		if got, err := os.Readlink(filepath.Join(to, name)); err != nil || got != exp {
			t.Fatalf("%s: exp a link to %s, got %q %v", name, exp, got, err)
		}
	}
	if fi, err := os.Lstat(filepath.Join(to, "fifo")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("fifo: %v %v", fi, err)
	}
	// A tree copied again onto itself fails instead of writing through
	// what is there.
	if err := CopyTree(from, to); err == nil {
		t.Fatal("exp an error copying onto existing files")
	}
	if b, _ := os.ReadFile("/etc/passwd"); len(b) == 0 {
		t.Fatal("/etc/passwd is empty")
	}
}
