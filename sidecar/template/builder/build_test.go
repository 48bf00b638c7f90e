package builder

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/patina-dev/patina/sidecar/template"
)

type entry struct {
	name, body, link string
	mode             int64
	typ              byte
}

func mkTar(t *testing.T, es ...entry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range es {
		h := &tar.Header{Name: e.name, Mode: e.mode, Typeflag: e.typ, Linkname: e.link, Size: int64(len(e.body))}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestPrepareHash(t *testing.T) {
	dir := t.TempDir()
	m := New(Config{StateDir: dir}, nil)
	base := []entry{{name: "a.txt", body: "a", mode: 0o644, typ: tar.TypeReg}, {name: "link", link: "/etc/shadow", mode: 0o777, typ: tar.TypeSymlink}}
	src := func(dockerfile string, es ...entry) template.Source {
		return template.Source{Raw: []byte(`{"build":{"dockerfile":"Dockerfile"}}`), Config: template.Devcontainer{Dockerfile: ".devcontainer/Dockerfile"}, Dockerfile: []byte(dockerfile), Context: mkTar(t, es...)}
	}
	hash := func(s template.Source) string {
		t.Helper()
		p, err := m.prepare(s)
		if err != nil {
			t.Fatal(err)
		}
		p.remove()
		return p.hash
	}
	h0 := hash(src("FROM x\n", base...))
	if h0 != hash(src("FROM x\n", base...)) {
		t.Fatal("the same content hashed differently")
	}
	for name, s := range map[string]template.Source{
		"dockerfile": src("FROM y\n", base...),
		"file":       src("FROM x\n", entry{name: "a.txt", body: "b", mode: 0o644, typ: tar.TypeReg}, base[1]),
		"mode":       src("FROM x\n", entry{name: "a.txt", body: "a", mode: 0o755, typ: tar.TypeReg}, base[1]),
		"link":       src("FROM x\n", base[0], entry{name: "link", link: "/etc/passwd", mode: 0o777, typ: tar.TypeSymlink}),
		"added":      src("FROM x\n", append(base, entry{name: "b", body: "", mode: 0o644, typ: tar.TypeReg})...),
	} {
		if hash(s) == h0 {
			t.Errorf("%s: a change left the hash as it was", name)
		}
	}
	// The context sent holds the files, the link as a link, and the
	// Dockerfile under its own name.
	// It is loaded through LoadContext, one at a time, and dropped.
	loaded := src("FROM x\n", base...)
	ctxTar := loaded.Context
	loaded.Context = nil
	loaded.LoadContext = func(context.Context) ([]byte, error) { return ctxTar, nil }
	p, err := m.prepareOne(context.Background(), &loaded)
	if err != nil {
		t.Fatal(err)
	}
	if loaded.Context != nil || loaded.LoadContext != nil {
		t.Fatal("the loaded context is still held after prepare")
	}
	if p.hash != h0 {
		t.Fatal("a context loaded by LoadContext hashed differently")
	}
	f, err := p.open()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := map[string]string{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		got[h.Name] = string(h.Typeflag) + ":" + string(b) + h.Linkname
	}
	exp := map[string]string{"a.txt": "0:a", "link": "2:/etc/shadow", dockerfileEntry: "0:FROM x\n"}
	if len(got) != len(exp) {
		t.Fatalf("exp %v, got %v", exp, got)
	}
	for k, v := range exp {
		if got[k] != v {
			t.Fatalf("exp %v, got %v", exp, got)
		}
	}
	// Bounds.
	small := New(Config{MaxContextBytes: 1024, StateDir: dir}, nil)
	if _, err := small.prepare(src("FROM x\n", entry{name: "big", body: string(make([]byte, 4096)), mode: 0o644, typ: tar.TypeReg})); !errors.Is(err, template.ErrInvalid) {
		t.Fatalf("a context over the bound: %v", err)
	}
	// Only the context file kept above is on disk.
	p.remove()
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("context files left behind: %v", left)
	}
}

func TestTail(t *testing.T) {
	var all bytes.Buffer
	tl := newTail(2, &all)
	tl.write("one\ntwo\nthr")
	tl.write("ee\nfour")
	tl.flush()
	if got := tl.lines(); len(got) != 2 || got[0] != "three" || got[1] != "four" {
		t.Fatalf("exp [three four], got %q", got)
	}
	if all.String() != "one\ntwo\nthree\nfour" {
		t.Fatalf("passed on %q", all.String())
	}
}
