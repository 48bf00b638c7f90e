package worktree

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// A workspace on this host reads the objects of its base commit from a
// store the sidecar keeps: a pack (and its index) of exactly the objects
// that commit reaches, written here by host git from the user's
// repository. Only what the user's history reaches from a commit goes in:
// no other branch, no note, no anchor, no quarantine, no object a
// workspace sent that nothing the commit reaches refers to.

// CommitPackRequest asks for a pack of what Commit reaches.
type CommitPackRequest struct {
	// Commit is the full id of the commit whose objects are packed.
	Commit string
	// Exclude, if set, is an ancestor of Commit whose objects the reader
	// already has (another pack of this kind): they are left out, and no
	// object in the pack is a delta against them (the pack stands alone).
	Exclude string
	// Dir is an existing, empty directory named pack, in an object
	// directory of its own (git's temporary files go there, then are
	// renamed: it may be on another file system than the repository).
	Dir string
}

// CommitPack is a pack written by WriteCommitPack.
type CommitPack struct {
	// Name is the pack's base name in Dir: pack-<hash> (.pack, .idx).
	Name  string
	Bytes int64 // of the .pack
}

// WriteCommitPack writes to req.Dir a pack (with its index: git
// pack-objects writes both, so nothing is indexed again) of every object
// req.Commit reaches, less what req.Exclude reaches. Existing deltas and
// compressed objects of the user's packs are reused as they are; loose
// objects are not searched for deltas (speed over size: the pack stays on
// this host). Replace refs are ignored: the pack holds the objects
// themselves, as the workspace's git, which has no replace refs, reads
// them. A shallow repository gives the history it has.
func (r *Repo) WriteCommitPack(ctx context.Context, req CommitPackRequest) (CommitPack, error) {
	p, err := r.writeCommitPack(ctx, req)
	if err != nil {
		return CommitPack{}, fmt.Errorf("pack the objects of %s: %w", req.Commit, err)
	}
	return p, nil
}

func (r *Repo) writeCommitPack(ctx context.Context, req CommitPackRequest) (CommitPack, error) {
	if err := r.format.checkOID("commit", req.Commit); err != nil {
		return CommitPack{}, err
	}
	revs := req.Commit + "\n"
	if req.Exclude != "" {
		if err := r.format.checkOID("excluded commit", req.Exclude); err != nil {
			return CommitPack{}, err
		}
		revs += "^" + req.Exclude + "\n"
	}
	if !filepath.IsAbs(req.Dir) || filepath.Base(req.Dir) != "pack" {
		return CommitPack{}, fmt.Errorf("pack directory %q is not an absolute path to a directory named pack", req.Dir)
	}
	// git writes a pack in a temporary file of the object directory, then
	// renames it into place: that object directory is the pack's own, and
	// the repository's objects are read as its alternates.
	c := r.cmd([]string{
		"GIT_NO_REPLACE_OBJECTS=1",
		"GIT_OBJECT_DIRECTORY=" + filepath.Dir(req.Dir),
		"GIT_ALTERNATE_OBJECT_DIRECTORIES=" + quoteAlternate(r.objectsDir),
	},
		"-c", "pack.compression=1", "pack-objects", "--revs", "--window=0", "--delta-base-offset", "-q",
		filepath.Join(req.Dir, "pack"))
	c.stdin = strings.NewReader(revs)
	out, err := r.git.run(ctx, c)
	if err != nil {
		return CommitPack{}, err
	}
	hash := strings.TrimSpace(string(out))
	if !r.format.isOID(hash) {
		return CommitPack{}, fmt.Errorf("git pack-objects named no pack (%q)", hash)
	}
	name := "pack-" + hash
	fi, err := os.Stat(filepath.Join(req.Dir, name+".pack"))
	if err != nil {
		return CommitPack{}, err
	}
	if _, err := os.Stat(filepath.Join(req.Dir, name+".idx")); err != nil {
		return CommitPack{}, err
	}
	return CommitPack{Name: name, Bytes: fi.Size()}, nil
}

// quoteAlternate quotes a path for GIT_ALTERNATE_OBJECT_DIRECTORIES when
// it holds its separator or starts with a quote (git then reads it as a
// C-style quoted string).
func quoteAlternate(p string) string {
	if !strings.ContainsAny(p, ":\"") {
		return p
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(p); i++ {
		if c := p[i]; c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(p[i])
	}
	b.WriteByte('"')
	return b.String()
}

// IsAncestor reports whether commit a is an ancestor of commit b (or b
// itself); both must be full ids.
func (r *Repo) IsAncestor(ctx context.Context, a, b string) (bool, error) {
	if err := r.format.checkOID("commit", a); err != nil {
		return false, err
	}
	if err := r.format.checkOID("commit", b); err != nil {
		return false, err
	}
	return r.isAncestor(ctx, nil, a, b)
}

// NearestAncestor returns, of the candidates that are ancestors of commit
// (or commit itself), the latest: one that no other such candidate
// descends from (of two on branches merged since, the first given); false
// if none is. Candidates that are not full ids of this repository, or
// name no commit it has, are passed over. It asks git whether one commit
// is an ancestor of another (generation numbers, with a commit-graph),
// never counts the commits between.
func (r *Repo) NearestAncestor(ctx context.Context, commit string, candidates []string) (string, bool, error) {
	if err := r.format.checkOID("commit", commit); err != nil {
		return "", false, err
	}
	best := ""
	for _, c := range candidates {
		if !r.format.isOID(c) || c == best {
			continue
		}
		if best != "" {
			// Nearer than best only if it descends from it.
			ok, err := r.ancestorOf(ctx, best, c)
			if err != nil || !ok {
				if err != nil {
					return "", false, err
				}
				continue
			}
		}
		ok, err := r.ancestorOf(ctx, c, commit)
		if err != nil {
			return "", false, err
		}
		if ok {
			best = c
		}
	}
	return best, best != "", nil
}

// ancestorOf is isAncestor that answers false for an id that names no
// commit here (merge-base exits 128).
func (r *Repo) ancestorOf(ctx context.Context, a, b string) (bool, error) {
	ok, err := r.isAncestor(ctx, nil, a, b)
	if err != nil && exitCode(err) > 1 {
		return false, nil
	}
	return ok, err
}

// Key is a short stable name of the repository (a hash of its common git
// directory's path): where the sidecar keeps things per repository.
func (r *Repo) Key() string { return r.key }
