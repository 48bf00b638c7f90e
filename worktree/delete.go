package worktree

import (
	"context"
	"fmt"
)

// Delete removes a workspace from the user's repository: its state note
// and, unless req.KeepBranch, its branch (compare-and-swap) and its log
// note. With KeepBranch the branch and the log stay for review (the name
// stays taken by the branch). It refuses (ErrConflict) to delete a branch
// checked out in one of the user's working trees. A legacy workspace's
// worktree admin directory goes too. No other ref is left behind; objects
// the workspace brought in stay until git's gc finds them unreachable. The
// workspace's files and container are the sidecar's to remove.
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
	if !req.KeepBranch && ws.Head != "" {
		dir, _, err := r.checkedOut(ctx, ref)
		if err != nil {
			return err
		}
		if dir != "" {
			return fmt.Errorf("%w: branch %s is checked out in %s", ErrConflict, ws.Branch, dir)
		}
	}
	if ws.Legacy {
		if _, err := r.removeLegacyAdmin(ctx, ws.Name); err != nil {
			return err
		}
	}
	msg := "workspace deleted"
	if req.KeepBranch {
		msg += ", branch kept at " + ws.Head
	}
	r.logEvent(ctx, ws, Event{Kind: EventDeleted, Message: msg})
	if err := r.removeNote(ctx, StateNotesRef, ws.Anchor); err != nil {
		return err
	}
	if !req.KeepBranch {
		if ws.Head != "" {
			if _, err := r.run(ctx, "update-ref", "-m", "patina: delete workspace "+ws.Name, "-d", ref, ws.Head); err != nil {
				return fmt.Errorf("delete branch %s: %w", ws.Branch, err)
			}
		}
		if err := r.removeNote(ctx, LogNotesRef, ws.Anchor); err != nil {
			return err
		}
	}
	r.logger.Info("workspace deleted", "workspace", ws.Name, "keep_branch", req.KeepBranch)
	return nil
}
