package worktree

// Parsers of git's machine-readable (-z, porcelain) output. Git's
// human-readable messages are read only by classify in git.go.

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// worktreeEntry is one entry of `git worktree list --porcelain -z`.
type worktreeEntry struct {
	path     string
	head     string
	branch   string // full ref, "" when detached
	bare     bool
	prunable bool // git knows its directory is gone
}

// listWorktrees lists the worktrees of the repository at dir; the first is
// the main one.
func listWorktrees(ctx context.Context, g *runner, dir string) ([]worktreeEntry, error) {
	out, err := g.run(ctx, gitCmd{dir: dir, args: []string{"worktree", "list", "--porcelain", "-z"}})
	if err != nil {
		return nil, err
	}
	return parseWorktreeList(string(out)), nil
}

// parseWorktreeList parses attribute lines separated by NUL, entries
// separated by an empty attribute.
func parseWorktreeList(out string) []worktreeEntry {
	var list []worktreeEntry
	var cur *worktreeEntry
	for _, attr := range strings.Split(out, "\x00") {
		if attr == "" {
			cur = nil
			continue
		}
		key, val, _ := strings.Cut(attr, " ")
		if key == "worktree" {
			list = append(list, worktreeEntry{path: val})
			cur = &list[len(list)-1]
			continue
		}
		if cur == nil {
			continue
		}
		switch key {
		case "HEAD":
			cur.head = val
		case "branch":
			cur.branch = val
		case "bare":
			cur.bare = true
		case "prunable":
			cur.prunable = true
		}
	}
	return list
}

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

// parseNameStatusZ parses `git diff-tree -r -M --name-status -z`: a status
// ("M", "A", "D", "T", "R097", "C100") then one path, or two for renames
// and copies.
func parseNameStatusZ(out string) ([]FileStat, error) {
	f := strings.Split(strings.TrimSuffix(out, "\x00"), "\x00")
	if len(f) == 1 && f[0] == "" {
		return nil, nil
	}
	var files []FileStat
	for i := 0; i < len(f); {
		code := f[i]
		if code == "" {
			return nil, fmt.Errorf("diff: empty status at field %d", i)
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
			return nil, fmt.Errorf("diff: unknown status %q", code)
		}
		if i+paths >= len(f) {
			return nil, fmt.Errorf("diff: truncated entry for status %q", code)
		}
		if paths == 2 {
			fs.OldPath, fs.Path = f[i+1], f[i+2]
		} else {
			fs.Path = f[i+1]
		}
		files = append(files, fs)
		i += 1 + paths
	}
	return files, nil
}

// numstat is one line of `--numstat`.
type numstat struct {
	added, deleted int
	binary         bool
}

// parseNumstatZ parses `git diff-tree -r -M --numstat -z`:
// "<added>\t<deleted>\t<path>\0" or, for renames and copies,
// "<added>\t<deleted>\t\0<old>\0<new>\0"; binary files count "-". It
// returns new path -> counts.
func parseNumstatZ(out string) (map[string]numstat, error) {
	stats := map[string]numstat{}
	f := strings.Split(strings.TrimSuffix(out, "\x00"), "\x00")
	if len(f) == 1 && f[0] == "" {
		return stats, nil
	}
	for i := 0; i < len(f); {
		parts := strings.SplitN(f[i], "\t", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("numstat: bad entry %q", f[i])
		}
		var ns numstat
		if parts[0] == "-" && parts[1] == "-" {
			ns.binary = true
		} else {
			a, err1 := strconv.Atoi(parts[0])
			d, err2 := strconv.Atoi(parts[1])
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("numstat: bad counts %q", f[i])
			}
			ns.added, ns.deleted = a, d
		}
		path := parts[2]
		i++
		if path == "" { // rename or copy: old and new follow
			if i+1 >= len(f) {
				return nil, fmt.Errorf("numstat: truncated rename")
			}
			path = f[i+1]
			i += 2
		}
		stats[path] = ns
	}
	return stats, nil
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
