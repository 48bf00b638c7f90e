package worktree

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// objectFormat is the repository's hash: sha1 or sha256.
type objectFormat struct {
	name   string
	hexLen int
	newH   func() hash.Hash
}

func parseObjectFormat(s string) (objectFormat, error) {
	switch strings.TrimSpace(s) {
	case "sha1":
		return objectFormat{name: "sha1", hexLen: 40, newH: sha1.New}, nil
	case "sha256":
		return objectFormat{name: "sha256", hexLen: 64, newH: sha256.New}, nil
	}
	return objectFormat{}, fmt.Errorf("unknown object format %q", s)
}

// isOID reports whether s is a full object id of this format.
func (f objectFormat) isOID(s string) bool { return len(s) == f.hexLen && isHex(s) }

// checkOID refuses anything but a full object id of this format before it
// reaches git as an argument.
func (f objectFormat) checkOID(what, s string) error {
	if !f.isOID(s) {
		return &NameError{What: "object id", Name: s, Rule: fmt.Sprintf("%s must be %d lowercase hex digits", what, f.hexLen)}
	}
	return nil
}

// blobID is the id git gives a blob with content b.
func (f objectFormat) blobID(b []byte) string {
	h := f.newH()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// anchorContent is the blob a format-2 workspace's notes hang on: unique
// per workspace id, so no two workspaces ever share a note, and computable
// from the id alone, so a note claiming an id on another object is seen
// for what it is.
func anchorContent(id string) []byte { return []byte("patina workspace " + id + "\n") }

// anchorID is the object id of the anchor of workspace id.
func (f objectFormat) anchorID(id string) string { return f.blobID(anchorContent(id)) }

// maxAlternateDepth is how deep git follows alternates of alternates.
const maxAlternateDepth = 5

// objectDirs lists objects (the repository's object directory) and every
// alternate object directory it borrows from, recursively as git does,
// that exists: absolute, symlinks resolved, each once. The alternates
// files are the user's configuration (no workspace can write them).
func objectDirs(objects string) []string {
	var dirs []string
	seen := map[string]bool{}
	var walk func(dir string, depth int)
	walk = func(dir string, depth int) {
		real, err := filepath.EvalSymlinks(dir)
		if err != nil || seen[real] {
			return
		}
		if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
			return
		}
		seen[real] = true
		dirs = append(dirs, real)
		if depth >= maxAlternateDepth {
			return
		}
		b, err := readSmallFile(filepath.Join(real, "info", "alternates"), 1<<20)
		if err != nil {
			return
		}
		for _, alt := range parseAlternates(string(b)) {
			if !filepath.IsAbs(alt) {
				alt = filepath.Join(real, alt)
			}
			walk(alt, depth+1)
		}
	}
	walk(objects, 0)
	return dirs
}

// parseAlternates parses an objects/info/alternates file: one path per
// line, '#' comments and blank lines ignored, a line starting with '"' is
// C-quoted.
func parseAlternates(s string) []string {
	var paths []string
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSuffix(line, "\r")
		if line == "" || line[0] == '#' {
			continue
		}
		if line[0] == '"' {
			u, err := strconv.Unquote(line)
			if err != nil {
				continue
			}
			line = u
		}
		if line == "" || strings.ContainsRune(line, 0) {
			continue
		}
		paths = append(paths, line)
	}
	return paths
}
