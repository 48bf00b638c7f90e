//go:build linux

package image

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/patina-dev/patina/internal/syncbuf"
)

// fakeDebootstrap writes a script standing in for debootstrap: it appends
// its arguments as one line to <dir>/calls, prints a few lines on stdout and
// stderr, creates a small tree in its target ($4) and then runs body.
func fakeDebootstrap(t *testing.T, body string) (path, calls string) {
	t.Helper()
	dir := t.TempDir()
	calls = filepath.Join(dir, "calls")
	path = filepath.Join(dir, "debootstrap")
	script := `#!/bin/bash
set -e
echo "$*" >> ` + calls + `
target=$4
grep -qx force-unsafe-io "$target/etc/dpkg/dpkg.cfg.d/patina-unsafe-io"
echo "I: Retrieving InRelease"
echo "W: a warning on stderr" >&2
mkdir -p "$target"/{usr/bin,etc,dev/pts,proc,sys,tmp,var/cache/apt/archives/partial,var/lib/apt/lists/partial,debootstrap}
echo hello > "$target/usr/bin/hello"
ln -s usr/bin "$target/bin"
echo "nameserver 192.0.2.1" > "$target/etc/resolv.conf"
echo host > "$target/etc/hostname"
echo deb > "$target/var/cache/apt/archives/bash_5.2_amd64.deb"
echo list > "$target/var/lib/apt/lists/deb.example.invalid_debian_dists_bookworm_InRelease"
echo inside-dev > "$target/dev/leftover"
printf 'no final newline'
echo
` + body + "\n"
	must(t, os.WriteFile(path, []byte(script), 0o755))
	return path, calls
}

// buildFixture is a Manager with a fake debootstrap and a fake Docker.
type buildFixture struct {
	m       *Manager
	api     *fakeAPI
	calls   string // the fake's argument log
	tempDir string // where rootfs trees go
}

func newBuildFixture(t *testing.T, body string, present ...string) buildFixture {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("Build checks for root")
	}
	path, calls := fakeDebootstrap(t, body)
	tempDir := t.TempDir()
	if err := checkBuildDir(tempDir); err != nil {
		t.Skipf("temp dir unusable: %v", err)
	}
	api := newFakeAPI(present...)
	cfg := Config{
		Apt:         AptConfig{Root: filepath.Join("testdata", "apt", "host-deb822")},
		Debootstrap: path,
		TempDir:     tempDir,
		LockDir:     t.TempDir(),
		LockPoll:    5 * time.Millisecond,
	}
	return buildFixture{m: New(cfg, api, nil), api: api, calls: calls, tempDir: tempDir}
}

// callLines returns the fake debootstrap's argument lines.
func (f buildFixture) callLines(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(f.calls)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	must(t, err)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// assertCleaned fails unless every temporary tree has been removed.
func (f buildFixture) assertCleaned(t *testing.T) {
	t.Helper()
	entries, err := os.ReadDir(f.tempDir)
	must(t, err)
	if len(entries) != 0 {
		t.Fatalf("exp the temporary root filesystem removed, got %v", entries)
	}
}

func TestBuild(t *testing.T) {
	f := newBuildFixture(t, "")
	var progress syncbuf.Buffer
	res, err := f.m.Build(context.Background(), BuildRequest{Progress: &progress})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if !res.Built || res.Tag != DefaultTag || res.ID == "" || res.Mirror != "http://deb.example.invalid/debian" {
		t.Errorf("exp a built default image from the discovered mirror, got %+v", res)
	}
	calls := f.callLines(t)
	if len(calls) != 1 {
		t.Fatalf("exp one debootstrap run, got %q", calls)
	}
	args := strings.Fields(calls[0])
	if exp := []string{"--variant=minbase", "--include=bash,coreutils,git,ca-certificates,procps,vim-tiny,less", "bookworm"}; !slices.Equal(args[:3], exp) ||
		!strings.HasPrefix(args[3], filepath.Join(f.tempDir, "patina-rootfs-")) || args[4] != "http://deb.example.invalid/debian" {
		t.Errorf("exp debootstrap %q <dir> <mirror>, got %q", exp, args)
	}
	for _, line := range []string{"I: Retrieving InRelease\n", "W: a warning on stderr\n", "no final newline\n", "==> importing patina/base:bookworm", "==> built patina/base:bookworm"} {
		if !strings.Contains(progress.String(), line) {
			t.Errorf("exp progress with %q, got:\n%s", line, progress.String())
		}
	}

	if len(f.api.imports) != 1 {
		t.Fatalf("exp one import, got %d", len(f.api.imports))
	}
	imp := f.api.imports[0]
	if imp.ref != DefaultTag {
		t.Errorf("exp import as %s, got %s", DefaultTag, imp.ref)
	}
	for _, exp := range []string{`CMD ["/bin/bash"]`, "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "ENV LANG=C.UTF-8", "WORKDIR /", "LABEL dev.patina.image=base", "LABEL dev.patina.suite=bookworm"} {
		if !slices.Contains(imp.opts.Changes, exp) {
			t.Errorf("exp change %q, got %q", exp, imp.opts.Changes)
		}
	}
	entries := []struct {
		name    string
		exp     bool
		content string
	}{
		{"./", true, ""},
		{"./usr/bin/hello", true, "hello\n"},
		{"./bin", true, ""},
		{"./etc/resolv.conf", true, ""},
		{"./etc/hostname", true, ""},
		{"./dev/", true, ""},
		{"./dev/leftover", false, ""},
		{"./etc/dpkg/dpkg.cfg.d/patina-unsafe-io", false, ""},
		{"./var/cache/apt/archives/partial/", true, ""},
		{"./var/cache/apt/archives/bash_5.2_amd64.deb", false, ""},
		{"./var/lib/apt/lists/deb.example.invalid_debian_dists_bookworm_InRelease", false, ""},
	}
	for _, e := range entries {
		_, ok := imp.entries[e.name]
		if ok != e.exp {
			t.Errorf("%s: exp in the image=%v, got %v", e.name, e.exp, ok)
		}
		if ok && imp.content[e.name] != e.content {
			t.Errorf("%s: exp content %q, got %q", e.name, e.content, imp.content[e.name])
		}
	}
	if h := imp.entries["./"]; h == nil || h.Mode != 0o755 {
		t.Errorf("exp / with mode 755, got %+v", h)
	}
	f.assertCleaned(t)
}

func TestBuildRequestOverrides(t *testing.T) {
	f := newBuildFixture(t, "")
	res, err := f.m.Build(context.Background(), BuildRequest{
		Tag: "patina/custom:v1", Suite: "trixie", Mirror: "file:///srv/mirror", Packages: []string{"bash", "python3"},
	})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if res.Tag != "patina/custom:v1" || res.Mirror != "file:///srv/mirror" {
		t.Errorf("exp the request's tag and mirror, got %+v", res)
	}
	args := strings.Fields(f.callLines(t)[0])
	if args[1] != "--include=bash,python3" || args[2] != "trixie" || args[4] != "file:///srv/mirror" {
		t.Errorf("exp the request's packages, suite and mirror, got %q", args)
	}
	if !slices.Contains(f.api.imports[0].opts.Changes, "LABEL dev.patina.suite=trixie") {
		t.Errorf("exp suite label trixie, got %q", f.api.imports[0].opts.Changes)
	}
}

func TestBuildFails(t *testing.T) {
	f := newBuildFixture(t, `printf 'line 1\nline 2\n' > "$target/debootstrap/debootstrap.log"
echo "E: Couldn't download packages: git" >&2
exit 1`)
	var progress syncbuf.Buffer
	_, err := f.m.Build(context.Background(), BuildRequest{Progress: &progress})
	var ce *CommandError
	if !errors.As(err, &ce) {
		t.Fatalf("exp a CommandError, got %v", err)
	}
	if ce.ExitCode != 1 || !strings.Contains(ce.Output, "E: Couldn't download packages: git") || ce.Log != "line 1\nline 2" {
		t.Errorf("exp exit 1 with output and log, got %+v", ce)
	}
	if !strings.Contains(progress.String(), "E: Couldn't download packages") {
		t.Errorf("exp the failure in progress, got:\n%s", progress.String())
	}
	if len(f.api.imports) != 0 {
		t.Errorf("exp no import, got %d", len(f.api.imports))
	}
	f.assertCleaned(t)
}

// TestBuildCancelled: cancelling a build kills debootstrap and its children
// and removes the tree.
func TestBuildCancelled(t *testing.T) {
	f := newBuildFixture(t, `sleep 1000 & echo "child $!"; echo ready; wait`)
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var child string
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if c, ok := strings.CutPrefix(sc.Text(), "child "); ok {
				child = c
			}
			if sc.Text() == "ready" {
				cancel()
			}
		}
	}()
	_, err := f.m.Build(ctx, BuildRequest{Progress: pw})
	pw.Close()
	<-read
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("exp context.Canceled, got %v", err)
	}
	f.assertCleaned(t)
	if child == "" {
		t.Fatalf("exp the fake's child pid in the progress")
	}
	if _, err := os.Stat("/proc/" + child); err == nil {
		if b, _ := os.ReadFile("/proc/" + child + "/stat"); !strings.Contains(string(b), ") Z ") {
			t.Errorf("exp debootstrap's child %s killed, it runs: %s", child, b)
		}
	}
}

func TestBuildIfMissing(t *testing.T) {
	f := newBuildFixture(t, "", DefaultTag)
	res, err := f.m.Build(context.Background(), BuildRequest{IfMissing: true})
	if err != nil || res.Built || res.ID == "" {
		t.Fatalf("exp the present image returned, got %+v, %v", res, err)
	}
	if calls := f.callLines(t); len(calls) != 0 {
		t.Fatalf("exp no debootstrap run, got %q", calls)
	}
}

// TestBuildConcurrent: concurrent builds of one tag with IfMissing build it
// once; the lock file serialises them and the later ones find it present.
func TestBuildConcurrent(t *testing.T) {
	f := newBuildFixture(t, "")
	const n = 3
	var wg sync.WaitGroup
	results := make([]BuildResult, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			// Each Manager has its own lock file handle, as processes do.
			m := New(f.m.cfg, f.api, nil)
			results[i], errs[i] = m.Build(context.Background(), BuildRequest{IfMissing: true})
		})
	}
	wg.Wait()
	built := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("build %d: %v", i, errs[i])
		}
		if results[i].Built {
			built++
		}
		if results[i].ID != results[0].ID {
			t.Errorf("exp one image, got %s and %s", results[0].ID, results[i].ID)
		}
	}
	if calls := f.callLines(t); built != 1 || len(calls) != 1 {
		t.Fatalf("exp one build, got %d built and debootstrap runs %q", built, calls)
	}
}

func TestBuildInvalid(t *testing.T) {
	f := newBuildFixture(t, "")
	tests := []struct {
		name string
		req  BuildRequest
		exp  error
		msg  string
	}{
		{name: "tag", req: BuildRequest{Tag: "Not A Tag"}, exp: ErrInvalid},
		{name: "digest", req: BuildRequest{Tag: "patina/x@sha256:" + strings.Repeat("a", 64)}, exp: ErrInvalid},
		{name: "suite", req: BuildRequest{Suite: "--foreign"}, exp: ErrInvalid},
		{name: "package", req: BuildRequest{Packages: []string{"git", "-x"}}, exp: ErrInvalid},
		{name: "package with comma", req: BuildRequest{Packages: []string{"git,vim"}}, exp: ErrInvalid},
		{name: "mirror option", req: BuildRequest{Mirror: "--no-check-gpg"}, exp: ErrInvalid},
		{name: "mirror scheme", req: BuildRequest{Mirror: "cdrom:[x]/"}, exp: ErrInvalid},
		{name: "no mirror", req: BuildRequest{Suite: "sid"}, exp: ErrNoMirror, msg: "no enabled deb source"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.m.Build(context.Background(), tt.req)
			if !errors.Is(err, tt.exp) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("exp %v (%q), got %v", tt.exp, tt.msg, err)
			}
		})
	}
	if calls := f.callLines(t); len(calls) != 0 {
		t.Fatalf("exp no debootstrap run, got %q", calls)
	}
}

func TestBuildNoDebootstrap(t *testing.T) {
	f := newBuildFixture(t, "")
	cfg := f.m.cfg
	cfg.Debootstrap = filepath.Join(t.TempDir(), "debootstrap")
	_, err := New(cfg, f.api, nil).Build(context.Background(), BuildRequest{})
	if !errors.Is(err, ErrNoDebootstrap) || !strings.Contains(err.Error(), "install it with: apt-get install -y debootstrap") {
		t.Fatalf("exp ErrNoDebootstrap with the install command, got %v", err)
	}
}
