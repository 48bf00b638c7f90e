package worktree

// Parsers of git's machine-readable (-z, porcelain) output. Git's
// human-readable messages are read only by classify in git.go.

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// parseNotesList parses `git notes list`: "<note blob> <annotated object>"
// per line. It returns annotated object -> note blob.
func parseNotesList(out string) map[string]string {
	notes := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && isHex(f[0]) && isHex(f[1]) {
			notes[f[1]] = f[0]
		}
	}
	return notes
}

// parseStatusZ parses `git status --porcelain=v1 -z --no-renames` into the
// paths that differ from HEAD in the index or working tree, untracked ones
// included; with unstagedOnly, only those whose working tree differs from
// the index (and untracked ones).
func parseStatusZ(out string, unstagedOnly bool) []string {
	var paths []string
	for _, e := range strings.Split(out, "\x00") {
		if len(e) < 4 || e[2] != ' ' {
			continue
		}
		if unstagedOnly && e[1] == ' ' {
			continue
		}
		paths = append(paths, e[3:])
	}
	return paths
}

// parseMergeTreeZ parses `git merge-tree --write-tree --name-only -z
// --no-messages`: the tree id, then (on conflict) the conflicted paths,
// each NUL-terminated, then an empty entry.
func parseMergeTreeZ(out string) (tree string, conflicts []string, err error) {
	parts := strings.Split(out, "\x00")
	if len(parts) == 0 || !isHex(parts[0]) {
		return "", nil, fmt.Errorf("merge-tree: unexpected output %q", truncate(out, 200))
	}
	seen := map[string]bool{}
	for _, p := range parts[1:] {
		if p == "" {
			break
		}
		if !seen[p] {
			seen[p] = true
			conflicts = append(conflicts, p)
		}
	}
	sort.Strings(conflicts)
	return parts[0], conflicts, nil
}

// parseNameStatusZ parses the whole of `git diff-tree -r -M --name-status
// -z` output.
func parseNameStatusZ(out string) ([]FileStat, error) {
	files, _, err := readNameStatusZ(strings.NewReader(out), math.MaxInt)
	return files, err
}

// numstat is one line of `--numstat`.
type numstat struct {
	added, deleted int
	binary         bool
}

// parseNumstatZ parses the whole of `git diff-tree -r -M --numstat -z`
// output: "<added>\t<deleted>\t<path>\0" or, for renames and copies,
// "<added>\t<deleted>\t\0<old>\0<new>\0"; binary files count "-". It
// returns new path -> counts.
func parseNumstatZ(out string) (map[string]numstat, error) {
	return readNumstatZ(strings.NewReader(out), math.MaxInt)
}

func isHex(s string) bool {
	if len(s) < 4 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// parseSize parses an object size from cat-file.
func parseSize(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return n, nil
}

// parseCatFileBatch parses `git cat-file --batch` output: for each object
// "<oid> <type> <size>\n<content>\n", or "<input> missing\n".
func parseCatFileBatch(out []byte) (map[string][]byte, error) {
	blobs := map[string][]byte{}
	for len(out) > 0 {
		header, rest, ok := bytes.Cut(out, []byte("\n"))
		if !ok {
			return nil, fmt.Errorf("cat-file: truncated header %q", truncate(string(header), 200))
		}
		f := strings.Fields(string(header))
		if len(f) == 2 && f[1] == "missing" {
			out = rest
			continue
		}
		if len(f) != 3 {
			return nil, fmt.Errorf("cat-file: bad header %q", truncate(string(header), 200))
		}
		size, err := strconv.Atoi(f[2])
		if err != nil || size < 0 || size+1 > len(rest) {
			return nil, fmt.Errorf("cat-file: bad size in %q", truncate(string(header), 200))
		}
		blobs[f[0]] = rest[:size]
		out = rest[size+1:]
	}
	return blobs, nil
}

// parseBatchCheck parses `git cat-file --batch-check='%(objectname)
// %(objecttype)'`: oid -> type; "<input> missing" lines are left out.
func parseBatchCheck(out string) map[string]string {
	types := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && isHex(f[0]) && f[1] != "missing" {
			types[f[0]] = f[1]
		}
	}
	return types
}

// parseIndexPackOutput parses what `git index-pack --stdin` prints: "pack"
// (or "keep") a tab and the pack's hash.
func parseIndexPackOutput(out string) (string, error) {
	line := strings.TrimRight(out, "\n")
	kind, hash, ok := strings.Cut(line, "\t")
	if !ok || (kind != "pack" && kind != "keep") || !isHex(hash) || len(hash) != 40 && len(hash) != 64 {
		return "", fmt.Errorf("index-pack: unexpected output %q", truncate(out, 200))
	}
	return hash, nil
}

// parseGitdirFile parses a linked worktree's admin "gitdir" file (the
// absolute path of the worktree's .git file) and returns the worktree's
// directory.
func parseGitdirFile(b []byte) (string, error) {
	p := strings.TrimRight(string(b), "\n")
	if p == "" || strings.ContainsAny(p, "\x00\n") || !filepath.IsAbs(p) {
		return "", fmt.Errorf("gitdir: not an absolute path: %q", truncate(p, 200))
	}
	p = filepath.Clean(p)
	if filepath.Base(p) != ".git" {
		return "", fmt.Errorf("gitdir: %q does not name a .git file", truncate(p, 200))
	}
	return filepath.Dir(p), nil
}

// parseHEADFile parses a HEAD file: the full ref of a symbolic HEAD, ""
// for a detached one.
func parseHEADFile(b []byte) (string, error) {
	s := strings.TrimRight(string(b), "\n")
	if ref, ok := strings.CutPrefix(s, "ref: "); ok {
		if _, err := validateRef(ref); err != nil {
			return "", err
		}
		return ref, nil
	}
	if isHex(s) {
		return "", nil
	}
	return "", fmt.Errorf("HEAD: unexpected content %q", truncate(s, 200))
}

// parseDotGitFile parses a worktree's .git file, "gitdir: <path>".
func parseDotGitFile(b []byte) (string, error) {
	s := strings.TrimRight(string(b), "\n")
	p, ok := strings.CutPrefix(s, "gitdir: ")
	if !ok || p == "" || strings.ContainsAny(p, "\x00\n") {
		return "", fmt.Errorf(".git file: unexpected content %q", truncate(s, 200))
	}
	return p, nil
}

// maxZField bounds one NUL-terminated field read by zScanner: a path in
// a workspace's tree, which the workspace chose.
const maxZField = 1 << 20

// zScanner reads NUL-terminated fields from git's -z output as a stream.
func zScanner(r io.Reader) *bufio.Scanner {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxZField)
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		if i := bytes.IndexByte(data, 0); i >= 0 {
			return i + 1, data[:i], nil
		}
		if atEOF && len(data) > 0 {
			return len(data), data, nil
		}
		return 0, nil, nil
	})
	return sc
}

// readNameStatusZ reads `git diff-tree -r -M --name-status -z` as a
// stream: up to max entries, then more = true if there was another.
func readNameStatusZ(r io.Reader, max int) (files []FileStat, more bool, err error) {
	sc := zScanner(r)
	for sc.Scan() {
		code := sc.Text()
		if code == "" {
			return nil, false, fmt.Errorf("diff: empty status")
		}
		if len(files) == max {
			return files, true, nil
		}
		fs := FileStat{}
		paths := 1
		switch code[0] {
		case 'A':
			fs.Status = StatusAdded
		case 'M':
			fs.Status = StatusModified
		case 'D':
			fs.Status = StatusDeleted
		case 'T':
			fs.Status = StatusTypeChanged
		case 'R':
			fs.Status, paths = StatusRenamed, 2
		case 'C':
			fs.Status, paths = StatusCopied, 2
		default:
			return nil, false, fmt.Errorf("diff: unknown status %q", truncate(code, 20))
		}
		var p [2]string
		for i := 0; i < paths; i++ {
			if !sc.Scan() {
				return nil, false, fmt.Errorf("diff: truncated entry for status %q", code)
			}
			p[i] = sc.Text()
		}
		if paths == 2 {
			fs.OldPath, fs.Path = p[0], p[1]
		} else {
			fs.Path = p[0]
		}
		files = append(files, fs)
	}
	return files, false, sc.Err()
}

// readNumstatZ reads `git diff-tree -r -M --numstat -z` as a stream, up to
// max entries: new path -> counts.
func readNumstatZ(r io.Reader, max int) (map[string]numstat, error) {
	stats := map[string]numstat{}
	sc := zScanner(r)
	for n := 0; n < max && sc.Scan(); n++ {
		parts := strings.SplitN(sc.Text(), "\t", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("numstat: bad entry %q", truncate(sc.Text(), 200))
		}
		var ns numstat
		if parts[0] == "-" && parts[1] == "-" {
			ns.binary = true
		} else {
			a, err1 := strconv.Atoi(parts[0])
			d, err2 := strconv.Atoi(parts[1])
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("numstat: bad counts %q", truncate(sc.Text(), 200))
			}
			ns.added, ns.deleted = a, d
		}
		path := parts[2]
		if path == "" { // rename or copy: old and new follow
			if !sc.Scan() || !sc.Scan() {
				return nil, fmt.Errorf("numstat: truncated rename")
			}
			path = sc.Text()
		}
		stats[path] = ns
	}
	return stats, sc.Err()
}
