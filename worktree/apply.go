package worktree

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// Apply stages the workspace's change — by default the tree of
// req.Snapshot (what Diff shows for it: committed, uncommitted and
// untracked work); the recorded branch tip with CommittedOnly or without a
// Snapshot — as one squashed change in the index and working tree of the
// user's main working tree (Repo.Root), without committing. HEAD does not
// move. The Snapshot's objects are read from req.Source and checked like
// Record's, then kept in the user's objects (the change is written to the
// user's index and files anyway).
//
// The change (base → snapshot, as Diff shows it) is three-way merged onto
// the user's index in the object database first, so a conflict fails with
// ErrConflict and changes nothing; changes the user already staged merge
// like any others. Unstaged changes, untracked or ignored files at paths
// the change writes fail with ErrDirty, also changing nothing; local
// changes elsewhere are kept. Applying a change that is already staged is
// a no-op (empty Files).
func (r *Repo) Apply(ctx context.Context, nameOrID string, req ApplyRequest) (ApplyResult, error) {
	res, err := r.apply(ctx, nameOrID, req)
	if err != nil {
		return ApplyResult{}, fmt.Errorf("apply %s: %w", nameOrID, err)
	}
	return res, nil
}

func (r *Repo) apply(ctx context.Context, nameOrID string, req ApplyRequest) (ApplyResult, error) {
	ws, err := r.lookup(ctx, nameOrID)
	if err != nil {
		return ApplyResult{}, err
	}
	snap := req.Snapshot
	if req.CommittedOnly {
		snap = ""
	}
	if snap == "" && ws.Head == "" {
		return ApplyResult{}, fmt.Errorf("%w: branch %s has been deleted", ErrNotFound, ws.Branch)
	}
	if snap == "" {
		snap = ws.Head
	}
	if err := r.format.checkOID("snapshot", snap); err != nil {
		return ApplyResult{}, err
	}
	q, err := r.fetch(ctx, req.Source, []string{snap}, r.haves(ctx, ws))
	if err != nil {
		return ApplyResult{}, err
	}
	defer q.remove()

	unlock, err := r.lock.lock(ctx)
	if err != nil {
		return ApplyResult{}, err
	}
	defer unlock()
	if ws, err = r.lookup(ctx, ws.ID); err != nil {
		return ApplyResult{}, err
	}
	if err := r.migrate(q); err != nil {
		return ApplyResult{}, err
	}
	tree, err := r.revParse(ctx, nil, snap+"^{tree}")
	if err != nil {
		return ApplyResult{}, err
	}

	dir := r.root
	op := fmt.Sprintf("apply %s to %s", ws.Branch, dir)
	staged, err := r.indexTree(ctx)
	if err != nil {
		return ApplyResult{}, fmt.Errorf("%w: cannot read the index of %s (unfinished merge?): %v", ErrDirty, dir, err)
	}

	// Three-way merge with the diff base (what Diff diffs against) as merge
	// base: both sides become one-parent commits on top of it, which makes
	// it their merge base whatever the user's history looks like.
	base, err := r.diffBase(ctx, nil, ws, snap)
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
	if err := r.checkClean(ctx, op, dir, r.repoEnv(), touched, added, true); err != nil {
		return ApplyResult{}, err
	}
	d, err := r.diffTrees(ctx, nil, staged, merged, diffLimits{files: math.MaxInt})
	if err != nil {
		return ApplyResult{}, err
	}
	// read-tree -m -u refuses stat-dirty entries, so refresh first (this
	// rewrites only the index's stat cache). Exit 1 lists modified files,
	// which are not among the touched ones (checked above).
	if _, err := r.run(ctx, "update-index", "-q", "--refresh"); err != nil && exitCode(err) != 1 {
		return ApplyResult{}, err
	}
	// Two-tree read-tree is what checkout does: paths that differ between
	// the index's tree and merged are updated in index and working tree,
	// others keep their local changes; files in the way make it refuse.
	if _, err := r.run(ctx, "read-tree", "-m", "-u", staged, merged); err != nil {
		return ApplyResult{}, fmt.Errorf("stage in %s: %w", dir, err)
	}
	res.Files = d.Files
	r.logEvent(ctx, ws, Event{Kind: EventApplied, Message: fmt.Sprintf("staged %d file(s) in %s", len(d.Files), dir)})
	r.logger.Info("workspace applied", "workspace", ws.Name, "dir", dir, "files", len(d.Files))
	return res, nil
}

// tempCommit writes an unreferenced commit (garbage once unused).
func (r *Repo) tempCommit(ctx context.Context, tree, parent, msg string) (string, error) {
	c := r.cmd(nil, "commit-tree", tree, "-p", parent, "-F", "-")
	c.stdin = strings.NewReader(msg + "\n")
	out, err := r.git.run(ctx, c)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// indexTree writes the tree of the user's index, using a copy of the index
// so the real one is not written (write-tree alone would rewrite its
// cache-tree).
func (r *Repo) indexTree(ctx context.Context) (string, error) {
	tmp, err := os.CreateTemp(r.commonDir, "patina-index-")
	if err != nil {
		return "", err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	defer os.Remove(tmp.Name() + ".lock")
	if err := copyFile(tmp.Name(), filepath.Join(r.commonDir, "index")); err != nil {
		return "", fmt.Errorf("copy index: %w", err)
	}
	return r.runEnv(ctx, []string{"GIT_INDEX_FILE=" + tmp.Name()}, "write-tree")
}

// copyFile copies src over dst; a missing src leaves dst empty (git then
// reads no entries). The copy keeps src's mtime: git's racy-clean check
// compares entries with it.
func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if errors.Is(err, os.ErrNotExist) {
		return os.Remove(dst)
	}
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	st, err := in.Stat()
	if err != nil {
		return err
	}
	return os.Chtimes(dst, st.ModTime(), st.ModTime())
}
