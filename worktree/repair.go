package worktree

import (
	"context"
	"fmt"
	"os"
)

// Repair re-creates the worktree of a workspace whose directory has
// vanished: git forgets the stale worktree (worktree remove, falling back to
// worktree prune) and the branch is checked out again at
// <StateDir>/worktrees/<repo-key>/<name>. Uncommitted work that was in the
// vanished directory is gone; the branch keeps every commit. If the branch
// itself was deleted it is re-created at the initial commit. A workspace
// that is not missing is returned unchanged.
func (r *Repo) Repair(ctx context.Context, nameOrID string) (Workspace, error) {
	ws, err := r.repair(ctx, nameOrID)
	if err != nil {
		return Workspace{}, fmt.Errorf("repair %s: %w", nameOrID, err)
	}
	return ws, nil
}

func (r *Repo) repair(ctx context.Context, nameOrID string) (Workspace, error) {
	unlock, err := r.lock.lock(ctx)
	if err != nil {
		return Workspace{}, err
	}
	defer unlock()
	ws, err := r.lookup(ctx, nameOrID)
	if err != nil {
		return Workspace{}, err
	}
	if !ws.Missing {
		return ws, nil
	}
	// Forget the dead worktree, wherever git had it.
	wts, err := listWorktrees(ctx, r.git, r.root)
	if err != nil {
		return Workspace{}, err
	}
	for _, wt := range wts[1:] {
		if wt.branch == branchRef(ws.Name) || wt.path == ws.Path {
			if _, err := r.run(ctx, "worktree", "remove", "--force", "--force", wt.path); err != nil {
				r.logger.Warn("worktree remove failed, pruning", "path", wt.path, "err", err)
				if _, err := r.run(ctx, "worktree", "prune"); err != nil {
					return Workspace{}, err
				}
			}
		}
	}
	repaired := "worktree re-created"
	if ws.Head == "" {
		if _, err := r.run(ctx, "update-ref", "-m", "patina: repair workspace "+ws.Name, branchRef(ws.Name), ws.Commit, ""); err != nil {
			return Workspace{}, fmt.Errorf("re-create branch %s at %s: %w", ws.Branch, ws.Commit, err)
		}
		ws.Head = ws.Commit
		repaired += fmt.Sprintf(", branch re-created at %s", ws.Commit)
	}
	ws.Path = r.pathFor(ws.Name)
	if _, err := os.Lstat(ws.Path); err == nil {
		return Workspace{}, fmt.Errorf("%w: %s is in the way (not a worktree); move it away", ErrExists, ws.Path)
	}
	if err := os.MkdirAll(r.wtRoot, 0o755); err != nil {
		return Workspace{}, err
	}
	if _, err := r.run(ctx, "worktree", "add", "--quiet", "--", ws.Path, ws.Branch); err != nil {
		return Workspace{}, fmt.Errorf("worktree add %s: %w", ws.Path, err)
	}
	ws.Missing = false
	if ws.GitDir, err = r.adminDir(ws.Path); err != nil {
		return Workspace{}, err
	}
	r.logEvent(ctx, ws, Event{Kind: EventRepaired, Message: repaired + " at " + ws.Path})
	r.logger.Info("workspace repaired", "workspace", ws.Name, "path", ws.Path)
	return ws, nil
}
