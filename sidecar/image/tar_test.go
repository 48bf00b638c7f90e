//go:build linux

package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// readTar returns the headers of a tar archive by name, and the contents of
// its regular files.
func readTar(t *testing.T, r io.Reader) (map[string]*tar.Header, map[string]string) {
	t.Helper()
	hdrs, content := map[string]*tar.Header{}, map[string]string{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return hdrs, content
		}
		if err != nil {
			t.Fatalf("read tar: %v", err)
		}
		if _, dup := hdrs[h.Name]; dup {
			t.Fatalf("exp each name once, got %s twice", h.Name)
		}
		hdrs[h.Name] = h
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("read tar: %v", err)
		}
		content[h.Name] = string(b)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestWriteTar(t *testing.T) {
	root := t.TempDir()
	p := func(rel string) string { return filepath.Join(root, rel) }
	must(t, os.MkdirAll(p("usr/bin"), 0o755))
	must(t, os.MkdirAll(p("tmp"), 0o755))
	must(t, os.Chmod(p("tmp"), 0o1777|os.ModeSticky))
	must(t, os.WriteFile(p("usr/bin/tool"), []byte("#!/bin/sh\n"), 0o755))
	must(t, os.WriteFile(p("usr/bin/su"), []byte("su"), 0o755))
	must(t, os.Chmod(p("usr/bin/su"), 0o755|os.ModeSetuid))
	must(t, os.WriteFile(p("secret"), []byte("x"), 0o640))
	must(t, os.WriteFile(p("empty"), nil, 0o644))
	must(t, os.Link(p("usr/bin/tool"), p("usr/bin/tool2")))
	must(t, os.Symlink("usr/bin", p("bin")))
	must(t, os.Symlink("/nonexistent/target", p("dangling")))
	must(t, unix.Mkfifo(p("fifo"), 0o600))
	must(t, os.MkdirAll(p("dev/pts"), 0o755))
	must(t, os.WriteFile(p("dev/skipped"), []byte("x"), 0o644))
	isRoot := os.Geteuid() == 0
	if isRoot {
		must(t, unix.Mknod(p("null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
		must(t, os.Chmod(p("null"), 0o666)) // past the umask
		must(t, os.Lchown(p("secret"), 1234, 5678))
	}

	var buf bytes.Buffer
	must(t, writeTar(context.Background(), &buf, root, skipUnder("dev")))
	hdrs, content := readTar(t, &buf)

	tests := []struct {
		name     string
		typ      byte
		mode     int64
		link     string
		content  string
		rootOnly bool
		uid, gid int
	}{
		{name: "./", typ: tar.TypeDir, mode: 0o755},
		{name: "./usr/", typ: tar.TypeDir, mode: 0o755},
		{name: "./tmp/", typ: tar.TypeDir, mode: 0o1777},
		{name: "./usr/bin/su", typ: tar.TypeReg, mode: 0o4755, content: "su"},
		{name: "./empty", typ: tar.TypeReg, mode: 0o644},
		{name: "./secret", typ: tar.TypeReg, mode: 0o640, content: "x", uid: 1234, gid: 5678}, // owner checked as root only
		// Lexical order: tool is stored, tool2 links to it.
		{name: "./usr/bin/tool", typ: tar.TypeReg, mode: 0o755, content: "#!/bin/sh\n"},
		{name: "./usr/bin/tool2", typ: tar.TypeLink, link: "./usr/bin/tool"},
		{name: "./bin", typ: tar.TypeSymlink, mode: 0o777, link: "usr/bin"},
		{name: "./dangling", typ: tar.TypeSymlink, mode: 0o777, link: "/nonexistent/target"},
		{name: "./fifo", typ: tar.TypeFifo, mode: 0o600},
		{name: "./dev/", typ: tar.TypeDir, mode: 0o755},
		{name: "./null", typ: tar.TypeChar, mode: 0o666, rootOnly: true},
	}
	expEntries := 1 // ./usr/bin/
	for _, tt := range tests {
		if tt.rootOnly && !isRoot {
			continue
		}
		expEntries++
		h, ok := hdrs[tt.name]
		if !ok {
			t.Errorf("exp entry %s, got none", tt.name)
			continue
		}
		if h.Typeflag != tt.typ {
			t.Errorf("%s: exp type %c, got %c", tt.name, tt.typ, h.Typeflag)
		}
		if tt.typ != tar.TypeLink && h.Mode != tt.mode {
			t.Errorf("%s: exp mode %o, got %o", tt.name, tt.mode, h.Mode)
		}
		if h.Linkname != tt.link {
			t.Errorf("%s: exp link %q, got %q", tt.name, tt.link, h.Linkname)
		}
		if content[tt.name] != tt.content {
			t.Errorf("%s: exp content %q, got %q", tt.name, tt.content, content[tt.name])
		}
		if isRoot && (h.Uid != tt.uid || h.Gid != tt.gid) {
			t.Errorf("%s: exp owner %d:%d, got %d:%d", tt.name, tt.uid, tt.gid, h.Uid, h.Gid)
		}
		if h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: exp numeric owner only, got %q:%q", tt.name, h.Uname, h.Gname)
		}
	}
	if h := hdrs["./null"]; isRoot && h != nil && (h.Devmajor != 1 || h.Devminor != 3) {
		t.Errorf("./null: exp device 1,3, got %d,%d", h.Devmajor, h.Devminor)
	}
	for _, name := range []string{"./dev/pts/", "./dev/skipped"} {
		if _, ok := hdrs[name]; ok {
			t.Errorf("exp %s left out, got it", name)
		}
	}
	if len(hdrs) != expEntries {
		t.Errorf("exp %d entries, got %d: %v", expEntries, len(hdrs), hdrs)
	}
}

// TestWriteTarMountPoint: a file system mounted inside the tree (a leftover
// /proc, say) contributes its directory but not its contents.
func TestWriteTarMountPoint(t *testing.T) {
	needMount(t)
	root := t.TempDir()
	mnt := filepath.Join(root, "proc")
	must(t, os.Mkdir(mnt, 0o555))
	must(t, unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"))
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	must(t, os.WriteFile(filepath.Join(mnt, "inside"), []byte("x"), 0o644))

	var buf bytes.Buffer
	must(t, writeTar(context.Background(), &buf, root, nil))
	hdrs, _ := readTar(t, &buf)
	if _, ok := hdrs["./proc/"]; !ok {
		t.Errorf("exp ./proc/, got %v", hdrs)
	}
	if _, ok := hdrs["./proc/inside"]; ok {
		t.Errorf("exp ./proc/inside left out, got it")
	}
}

func TestWriteTarCancelled(t *testing.T) {
	root := t.TempDir()
	must(t, os.WriteFile(filepath.Join(root, "f"), []byte("x"), 0o644))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := writeTar(ctx, io.Discard, root, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("exp context.Canceled, got %v", err)
	}
}

func TestSkipUnder(t *testing.T) {
	skip := skipUnder("dev", "proc")
	for rel, exp := range map[string]bool{
		"dev": false, "dev/null": true, "dev/pts/0": true, "device": false, "devx/a": false,
		"proc": false, "proc/1": true, "usr/dev/x": false,
	} {
		if got := skip(rel); got != exp {
			t.Errorf("skip(%q): exp %v, got %v", rel, exp, got)
		}
	}
}
