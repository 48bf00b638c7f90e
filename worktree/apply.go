package worktree

import (
	"context"
	"fmt"
	"strings"
)

// Apply stages the workspace's change — by default what Diff shows
// (committed, uncommitted and untracked work); only the commits with
// ApplyRequest.CommittedOnly — as one squashed change in the index and
// working tree of the user's main working tree (Repo.Root), without
// committing. HEAD does not move.
//
// The change (what Diff shows: base → workspace) is three-way merged onto
// the user's index in the object database first, so a conflict fails with ErrConflict
// and changes nothing; changes the user already staged merge like any
// others. Unstaged changes, untracked or ignored files at paths the change
// writes fail with ErrDirty, also changing nothing; local changes elsewhere
// are kept. Applying a change that is already staged is a no-op (empty
// Files).
func (r *Repo) Apply(ctx context.Context, nameOrID string, req ApplyRequest) (ApplyResult, error) {
	res, err := r.apply(ctx, nameOrID, req)
	if err != nil {
		return ApplyResult{}, fmt.Errorf("apply %s: %w", nameOrID, err)
	}
	return res, nil
}

func (r *Repo) apply(ctx context.Context, nameOrID string, req ApplyRequest) (ApplyResult, error) {
	unlock, err := r.lock.lock(ctx)
	if err != nil {
		return ApplyResult{}, err
	}
	defer unlock()
	ws, err := r.lookup(ctx, nameOrID)
	if err != nil {
		return ApplyResult{}, err
	}
	var tree string
	switch {
	case req.CommittedOnly && ws.Head == "":
		return ApplyResult{}, fmt.Errorf("%w: branch %s has been deleted", ErrNotFound, ws.Branch)
	case req.CommittedOnly:
		tree = ws.Head + "^{tree}"
	case ws.Missing:
		return ApplyResult{}, fmt.Errorf("%w: %s (repair the workspace, or apply committed work only)", ErrMissing, ws.Path)
	default:
		if tree, err = r.snapshot(ctx, ws.Path); err != nil {
			return ApplyResult{}, err
		}
	}

	dir := r.root
	op := fmt.Sprintf("apply %s to %s", ws.Branch, dir)
	staged, err := r.indexTree(ctx, dir, false)
	if err != nil {
		return ApplyResult{}, fmt.Errorf("%w: cannot read the index of %s (unfinished merge?): %v", ErrDirty, dir, err)
	}

	// Three-way merge with the diff base (what Diff diffs against) as merge
	// base: both sides become one-parent commits on top of it, which makes
	// it their merge base whatever the user's history looks like.
	base, err := r.diffBase(ctx, ws)
	if err != nil {
		return ApplyResult{}, err
	}
	theirs, err := r.tempCommit(ctx, tree, base, "patina: apply "+ws.Name)
	if err != nil {
		return ApplyResult{}, err
	}
	ours, err := r.tempCommit(ctx, staged, base, "patina: user's index")
	if err != nil {
		return ApplyResult{}, err
	}
	merged, conflicts, err := r.mergeTree(ctx, ours, theirs)
	if err != nil {
		return ApplyResult{}, err
	}
	if len(conflicts) > 0 {
		return ApplyResult{}, &FilesError{Kind: ErrConflict, Op: op, Dir: dir, Files: conflicts, Detail: "nothing was changed"}
	}
	res := ApplyResult{Dir: dir, Tree: merged}
	if merged == staged {
		return res, nil
	}
	touched, added, err := r.changes(ctx, staged, merged)
	if err != nil {
		return ApplyResult{}, err
	}
	if err := r.checkClean(ctx, op, dir, touched, added, true); err != nil {
		return ApplyResult{}, err
	}
	d, err := r.diffTrees(ctx, staged, merged, false)
	if err != nil {
		return ApplyResult{}, err
	}
	// read-tree -m -u refuses stat-dirty entries, so refresh first (this
	// rewrites only the index's stat cache). Exit 1 lists modified files,
	// which are not among the touched ones (checked above).
	if _, err := r.git.run(ctx, gitCmd{dir: dir, args: []string{"update-index", "-q", "--refresh"}}); err != nil && exitCode(err) != 1 {
		return ApplyResult{}, err
	}
	// Two-tree read-tree is what checkout does: paths that differ between
	// the index's tree and merged are updated in index and working tree,
	// others keep their local changes; files in the way make it refuse.
	if _, err := r.git.run(ctx, gitCmd{dir: dir, args: []string{"read-tree", "-m", "-u", staged, merged}}); err != nil {
		return ApplyResult{}, fmt.Errorf("stage in %s: %w", dir, err)
	}
	res.Files = d.Files
	r.logEvent(ctx, ws, Event{Kind: EventApplied, Message: fmt.Sprintf("staged %d file(s) in %s", len(d.Files), dir)})
	r.logger.Info("workspace applied", "workspace", ws.Name, "dir", dir, "files", len(d.Files))
	return res, nil
}

// tempCommit writes an unreferenced commit (garbage once unused).
func (r *Repo) tempCommit(ctx context.Context, tree, parent, msg string) (string, error) {
	out, err := r.git.run(ctx, gitCmd{dir: r.root, args: []string{"commit-tree", tree, "-p", parent, "-F", "-"}, stdin: []byte(msg + "\n")})
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}
