package worktree

import (
	"context"
	"fmt"
	"os"
)

// Delete removes a workspace: its worktree (uncommitted work in it is
// discarded), its state note and, unless req.KeepBranch, its branch and its
// log note. With KeepBranch the branch and the log stay for review (the
// name stays taken by the branch). It refuses (ErrConflict) to delete a
// branch checked out in another working tree.
func (r *Repo) Delete(ctx context.Context, nameOrID string, req DeleteRequest) error {
	if err := r.delete(ctx, nameOrID, req); err != nil {
		return fmt.Errorf("delete %s: %w", nameOrID, err)
	}
	return nil
}

func (r *Repo) delete(ctx context.Context, nameOrID string, req DeleteRequest) error {
	unlock, err := r.lock.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	ws, err := r.lookup(ctx, nameOrID)
	if err != nil {
		return err
	}
	ref := branchRef(ws.Name)
	wts, err := listWorktrees(ctx, r.git, r.root)
	if err != nil {
		return err
	}
	var remove []string
	for _, wt := range wts[1:] {
		if wt.path == ws.Path {
			remove = append(remove, wt.path)
		} else if wt.branch == ref && !wt.prunable && !req.KeepBranch {
			return fmt.Errorf("%w: branch %s is checked out in %s", ErrConflict, ws.Branch, wt.path)
		}
	}
	if len(wts) > 0 && wts[0].branch == ref && !req.KeepBranch {
		return fmt.Errorf("%w: branch %s is checked out in %s", ErrConflict, ws.Branch, wts[0].path)
	}

	for _, p := range remove {
		if _, err := r.run(ctx, "worktree", "remove", "--force", "--force", p); err != nil {
			return fmt.Errorf("worktree remove %s: %w", p, err)
		}
	}
	// A directory git does not know (left by a failed step) goes too, but
	// only inside patina's own worktrees dir.
	if own := r.pathFor(ws.Name); within(own, r.wtRoot) {
		if _, err := os.Lstat(own); err == nil && !isWorktreeDir(own) {
			if err := os.RemoveAll(own); err != nil {
				return err
			}
		}
	}
	msg := "worktree removed"
	if req.KeepBranch {
		msg += ", branch kept at " + ws.Head
	}
	r.logEvent(ctx, ws, Event{Kind: EventDeleted, Message: msg})
	if err := r.removeNote(ctx, StateNotesRef, ws.Commit); err != nil {
		return err
	}
	if !req.KeepBranch {
		if ws.Head != "" {
			if _, err := r.run(ctx, "update-ref", "-m", "patina: delete workspace "+ws.Name, "-d", ref, ws.Head); err != nil {
				return fmt.Errorf("delete branch %s: %w", ws.Branch, err)
			}
		}
		if err := r.removeNote(ctx, LogNotesRef, ws.Commit); err != nil {
			return err
		}
	}
	r.logger.Info("workspace deleted", "workspace", ws.Name, "keep_branch", req.KeepBranch)
	return nil
}
