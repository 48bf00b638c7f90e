package worktree

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

// MinCommitPrefix is the shortest abbreviated commit id ResolveCommit
// takes (git's own minimum).
const MinCommitPrefix = 4

// ResolveCommit expands a commit id, whole or abbreviated (at least
// MinCommitPrefix hex digits, any case), to the full id of a commit in the
// user's repository. It never guesses: no commit with that prefix is
// ErrNotFound, and several are ErrAmbiguous (an *AmbiguousError listing
// them), even when only one of them is on a workspace's branch, since a
// workspace can plant objects of its choosing (unreferenced) in the
// repository. Anything but hex digits is ErrInvalidName before git sees it.
func (r *Repo) ResolveCommit(ctx context.Context, id string) (string, error) {
	p := strings.ToLower(id)
	if len(p) < MinCommitPrefix || len(p) > r.format.hexLen || !isHex(p) {
		return "", &NameError{What: "commit id", Name: id, Rule: fmt.Sprintf("want %d to %d hex digits", MinCommitPrefix, r.format.hexLen)}
	}
	var candidates []string
	if len(p) == r.format.hexLen {
		candidates = []string{p}
	} else {
		// Every object of the repository (and its alternates) whose id
		// starts with p, one per line; none is no error.
		out, err := r.run(ctx, "rev-parse", "--disambiguate="+p)
		if err != nil {
			return "", err
		}
		for _, l := range strings.Split(out, "\n") {
			if r.format.isOID(l) && strings.HasPrefix(l, p) {
				candidates = append(candidates, l)
			}
		}
	}
	var commits []string
	if len(candidates) > 0 {
		types, err := r.objectTypes(ctx, nil, candidates)
		if err != nil {
			return "", err
		}
		for oid, t := range types {
			if t == "commit" {
				commits = append(commits, oid)
			}
		}
	}
	sort.Strings(commits)
	switch len(commits) {
	case 0:
		return "", fmt.Errorf("%w: no commit %s in %s", ErrNotFound, id, r.root)
	case 1:
		return commits[0], nil
	}
	return "", &AmbiguousError{Prefix: id, Commits: commits}
}

// CommitInfo is what ReadCommit tells of a commit.
type CommitInfo struct {
	ID      string   `json:"id"`
	Tree    string   `json:"tree"`
	Parents []string `json:"parents"`
}

// ReadCommit reads a commit of the user's repository (a full object id:
// a recorded workspace head, say). A missing object or one that is not a
// commit is ErrNotFound.
func (r *Repo) ReadCommit(ctx context.Context, oid string) (CommitInfo, error) {
	if err := r.format.checkOID("commit", oid); err != nil {
		return CommitInfo{}, err
	}
	types, err := r.objectTypes(ctx, nil, []string{oid})
	if err != nil {
		return CommitInfo{}, err
	}
	if types[oid] != "commit" {
		return CommitInfo{}, fmt.Errorf("%w: commit %s", ErrNotFound, oid)
	}
	// oid is checked: no option can hide in it.
	out, err := r.run(ctx, "log", "-1", "--format=%T %P", oid, "--")
	if err != nil {
		return CommitInfo{}, err
	}
	f := strings.Fields(out)
	if len(f) == 0 || !r.format.isOID(f[0]) {
		return CommitInfo{}, fmt.Errorf("read commit %s: unexpected output %q", oid, truncate(out, 200))
	}
	ci := CommitInfo{ID: oid, Tree: f[0], Parents: []string{}}
	for _, p := range f[1:] {
		if !r.format.isOID(p) {
			return CommitInfo{}, fmt.Errorf("read commit %s: unexpected output %q", oid, truncate(out, 200))
		}
		ci.Parents = append(ci.Parents, p)
	}
	return ci, nil
}
