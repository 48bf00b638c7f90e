package daggerws

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/patina-dev/patina/sidecar/client"
	"github.com/patina-dev/patina/tests"
)

// fixtureScript makes, in a workspace's /workspace, one of every kind of
// entry Fetch meets. The binary file holds every byte value.
const fixtureScript = `set -e
mkdir -p src/pkg empty "with space/ünï" locked
printf 'package pkg\n' > src/pkg/pkg.go
printf '#!/bin/sh\necho run\n' > run.sh && chmod 755 run.sh
printf 'ro' > readonly.txt && chmod 444 readonly.txt
: > empty.txt
printf 'x' > "with space/ünï/name with space.txt"
printf 'secret' > locked/inside && chmod 500 locked
for i in $(seq 0 255); do printf "\\$(printf %03o $i)"; done > bin.dat
ln -s src/pkg/pkg.go link-to-file
ln -s src link-to-dir
ln -s /etc/hostname link-out
ln -s ../../../../etc/hostname link-up
ln -s nowhere link-dangling
mkfifo fifo
`

// allBytes is bin.dat's content.
func allBytes() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

// TestFetch copies a scratch workspace holding every kind of entry and
// checks the copy byte for byte, mode for mode, and what was left out.
func TestFetch(t *testing.T) {
	_, c := startSidecar(t)
	must(t, "Create")(Create(testContext(t), c, CreateRequest{Name: "files"}))
	must(t, "Exec")(Exec(testContext(t), c, ExecRequest{Workspace: "files", Command: fixtureScript}))

	dest := filepath.Join(t.TempDir(), "out")
	res, err := Fetch(testContext(t), c, FetchRequest{Workspace: "files", Dest: dest})
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	t.Log(res.Summary())

	files := map[string]struct {
		content string
		perm    fs.FileMode
	}{
		"src/pkg/pkg.go":                     {"package pkg\n", 0o644},
		"run.sh":                             {"#!/bin/sh\necho run\n", 0o755},
		"readonly.txt":                       {"ro", 0o644}, // 0444 widened to owner read-write
		"empty.txt":                          {"", 0o644},
		"with space/ünï/name with space.txt": {"x", 0o644},
		"locked/inside":                      {"secret", 0o644},
		"bin.dat":                            {string(allBytes()), 0o644},
		"link-to-file":                       {"package pkg\n", 0o644}, // the target's bytes
	}
	for rel, exp := range files {
		p := filepath.Join(dest, rel)
		st, err := os.Lstat(p)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			continue
		}
		if !st.Mode().IsRegular() {
			t.Errorf("%s: exp a regular file, got %v", rel, st.Mode())
		}
		if got := st.Mode().Perm(); got != exp.perm {
			t.Errorf("%s: exp mode %v, got %v", rel, exp.perm, got)
		}
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(b, []byte(exp.content)) {
			t.Errorf("%s: exp %q, got %q (%v)", rel, exp.content, b, err)
		}
	}
	dirs := map[string]fs.FileMode{"src": 0o755, "src/pkg": 0o755, "empty": 0o755, "with space/ünï": 0o755, "locked": 0o700}
	for rel, perm := range dirs {
		st, err := os.Lstat(filepath.Join(dest, rel))
		if err != nil || !st.IsDir() || st.Mode().Perm() != perm {
			t.Errorf("%s: exp a directory with mode %v, got %v (%v)", rel, perm, st, err)
		}
	}

	skipped := map[string]string{}
	for _, s := range res.Skipped {
		skipped[s.Path] = s.Reason
	}
	for rel, reason := range map[string]string{
		"link-to-dir":   "points to a directory or out of the workspace",
		"link-out":      "points to a directory or out of the workspace",
		"link-up":       "points to a directory or out of the workspace",
		"link-dangling": "target does not exist",
		"fifo":          "not a regular file",
	} {
		if !strings.Contains(skipped[rel], reason) {
			t.Errorf("%s: exp skipped for %q, got %q", rel, reason, skipped[rel])
		}
		if _, err := os.Lstat(filepath.Join(dest, rel)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: exp left out of the copy, got %v", rel, err)
		}
	}
	if len(res.Skipped) != 5 {
		t.Errorf("exp 5 entries skipped, got %+v", res.Skipped)
	}
	if exp := len(files); res.Files != exp {
		t.Errorf("exp %d files, got %d", exp, res.Files)
	}
	if exp := len(dirs) + 1; res.Dirs != exp { // + "with space"
		t.Errorf("exp %d directories, got %d", exp, res.Dirs)
	}
	var total int64
	for _, f := range files {
		total += int64(len(f.content))
	}
	if res.Bytes != total {
		t.Errorf("exp %d bytes, got %d", total, res.Bytes)
	}
	if !strings.HasPrefix(res.Summary(), "fetched 8 files (") {
		t.Errorf("Summary: exp the counts first, got %q", res.Summary())
	}

	// Nothing else is in the copy.
	var all []string
	filepath.WalkDir(dest, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dest, p)
			all = append(all, filepath.ToSlash(rel))
		}
		return nil
	})
	if len(all) != len(files) {
		t.Errorf("exp only the %d files in the copy, got %q", len(files), all)
	}
}

// TestFetchRepository: a repository workspace is fetched without its own
// .git, which borrows objects through a path only its container has.
func TestFetchRepository(t *testing.T) {
	_, c := startSidecar(t)
	repo := tests.GitRepo(t, map[string]string{"README.md": "hello\n", "cmd/main.go": "package main\n"})
	must(t, "Create")(Create(testContext(t), c, CreateRequest{Name: "repo", Repo: repo}))
	must(t, "Exec")(Exec(testContext(t), c, ExecRequest{Workspace: "repo", Command: "echo new > new.txt"}))

	dest := t.TempDir()
	res, err := Fetch(testContext(t), c, FetchRequest{Workspace: "repo", Dest: dest})
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	for rel, exp := range map[string]string{"README.md": "hello\n", "cmd/main.go": "package main\n", "new.txt": "new\n"} {
		if b, err := os.ReadFile(filepath.Join(dest, rel)); err != nil || string(b) != exp {
			t.Errorf("%s: exp %q, got %q (%v)", rel, exp, b, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(dest, ".git")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf(".git: exp left out, got %v", err)
	}
	if len(res.Skipped) != 1 || res.Skipped[0].Path != ".git" {
		t.Errorf("exp .git skipped, got %+v", res.Skipped)
	}
}

// TestFetchLimits: past a limit Fetch fails naming it and the flag that
// raises it; an unknown workspace and a used destination fail clearly.
func TestFetchLimits(t *testing.T) {
	_, c := startSidecar(t)
	must(t, "Create")(Create(testContext(t), c, CreateRequest{Name: "big"}))
	must(t, "Exec")(Exec(testContext(t), c, ExecRequest{Workspace: "big",
		Command: "mkdir d && for i in 1 2 3 4 5; do head -c 1000 /dev/zero > d/f$i; done"}))

	for _, tc := range []struct {
		name string
		req  FetchRequest
		exp  string
	}{
		{"files", FetchRequest{MaxFiles: 4}, "more than 4 files"},
		{"bytes", FetchRequest{MaxBytes: 4999}, "more than 4999 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Workspace, tc.req.Dest = "big", t.TempDir()
			_, err := Fetch(testContext(t), c, tc.req)
			if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), tc.exp) || !strings.Contains(err.Error(), "raise --max-") {
				t.Fatalf("exp ErrLimit saying %q and how to raise it, got %v", tc.exp, err)
			}
		})
	}
	// Exactly at the limits is fine.
	res, err := Fetch(testContext(t), c, FetchRequest{Workspace: "big", Dest: t.TempDir(), MaxFiles: 5, MaxBytes: 5000})
	if err != nil || res.Files != 5 || res.Bytes != 5000 {
		t.Fatalf("at the limits: exp 5 files, 5000 bytes, got %+v, %v", res, err)
	}

	_, err = Fetch(testContext(t), c, FetchRequest{Workspace: "nope", Dest: t.TempDir()})
	if !IsAPICode(err, client.CodeNotFound) || !strings.Contains(err.Error(), `no workspace "nope"`) {
		t.Errorf("unknown workspace: exp not found with a hint, got %v", err)
	}

	used := t.TempDir()
	must(t, "write")("", writeFile(filepath.Join(used, "x"), "x"))
	if _, err := Fetch(testContext(t), c, FetchRequest{Workspace: "big", Dest: used}); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("used destination: exp an error, got %v", err)
	}
}

// IsAPICode reports whether err carries the sidecar's code.
func IsAPICode(err error, code string) bool {
	var apiErr *client.APIError
	return errors.As(err, &apiErr) && apiErr.Code == code
}

func TestFetchRequestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  FetchRequest
		exp  error
	}{
		{"ok", FetchRequest{Workspace: "w", Dest: "d"}, nil},
		{"no workspace", FetchRequest{Dest: "d"}, ErrNoWorkspace},
		{"no destination", FetchRequest{Workspace: "w"}, ErrInvalid},
		{"negative files", FetchRequest{Workspace: "w", Dest: "d", MaxFiles: -1}, ErrInvalid},
		{"negative bytes", FetchRequest{Workspace: "w", Dest: "d", MaxBytes: -1}, ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.req.Validate(); !errors.Is(err, tc.exp) || (tc.exp == nil) != (err == nil) {
				t.Errorf("exp %v, got %v", tc.exp, err)
			}
		})
	}
}

func TestPermOf(t *testing.T) {
	for mode, exp := range map[string]fs.FileMode{
		"-rw-r--r--":  0o644,
		"-rwxr-xr-x":  0o755,
		"drwx------":  0o700,
		"urwsr-xr-x":  0o755, // setuid: Go marks it with a leading u
		"dtrwxrwxrwx": 0o777,
		"Lrwxrwxrwx":  0o777,
		"-r--r--r--":  0o444,
		"":            0,
		"rwx":         0,
	} {
		if got := permOf(mode); got != exp {
			t.Errorf("permOf(%q): exp %v, got %v", mode, exp, got)
		}
	}
	// The form permOf reads is Go's own.
	for _, m := range []fs.FileMode{0o640, 0o755 | fs.ModeDir, 0o4755 | fs.ModeSetuid} {
		if got := permOf(m.String()); got != m.Perm() {
			t.Errorf("permOf(%q): exp %v, got %v", m.String(), m.Perm(), got)
		}
	}
}

// hostileFiles is a files API answering with names no real directory
// holds, as a broken or hostile sidecar could.
type hostileFiles struct{ reads []string }

func (h *hostileFiles) Addr() string { return "http://hostile.invalid" }

func (h *hostileFiles) ListDir(_ context.Context, _, path string) ([]client.FileInfo, error) {
	if path != "" {
		return nil, &client.APIError{Status: 404, Code: client.CodeNotFound, Message: "no " + path}
	}
	return []client.FileInfo{
		{Name: "..", Type: "dir", Mode: "drwxr-xr-x"},
		{Name: "../escape", Type: "file", Size: 1, Mode: "-rw-r--r--"},
		{Name: "a/b", Type: "file", Size: 1, Mode: "-rw-r--r--"},
		{Name: "nul\x00", Type: "file", Size: 1, Mode: "-rw-r--r--"},
		{Name: "", Type: "file", Size: 1, Mode: "-rw-r--r--"},
		{Name: "ok", Type: "file", Size: 2, Mode: "-rw-r--r--"},
	}, nil
}

func (h *hostileFiles) ReadFile(_ context.Context, _, path string) ([]byte, error) {
	h.reads = append(h.reads, path)
	return []byte("ok"), nil
}

// TestFetchRefusesBadNames: names that are not one path element are
// skipped, never written (a real sidecar cannot produce them, hence the
// stand-in).
func TestFetchRefusesBadNames(t *testing.T) {
	parent := t.TempDir()
	dest := filepath.Join(parent, "out")
	h := &hostileFiles{}
	res, err := Fetch(context.Background(), h, FetchRequest{Workspace: "w", Dest: dest})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(h.reads, []string{"ok"}) {
		t.Errorf("exp only ok read, got %q", h.reads)
	}
	if res.Files != 1 || len(res.Skipped) != 5 {
		t.Errorf("exp 1 file and 5 skipped, got %+v", res)
	}
	ents, _ := os.ReadDir(parent)
	if len(ents) != 1 || ents[0].Name() != "out" {
		t.Errorf("exp nothing written beside the destination, got %v", ents)
	}
}
