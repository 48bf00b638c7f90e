package worktree

import (
	"context"
	"fmt"
	"strings"
)

// Migrate converts a legacy workspace (format 1: a git worktree of the
// user's repository, notes on an empty start commit) to the current
// format: its state and log notes are copied to an anchor of its own, the
// old notes removed, and its worktree admin directory
// (<common>/worktrees/<name>…) removed without running git in that
// worktree or trusting its files (see legacyAdminDirs); then `git worktree
// prune` if it is safe. The branch is kept as it is, empty start commit
// included. The files of the old worktree stay where they are, for the
// sidecar to turn into the workspace's repository (Inside.Init with
// KeepFiles, Base = Workspace.Head).
//
// Migrate is idempotent: on a current workspace it finishes a migration
// that was interrupted (old notes or admin directory left), else does
// nothing.
func (r *Repo) Migrate(ctx context.Context, nameOrID string) (Workspace, error) {
	ws, err := r.migrateLegacy(ctx, nameOrID)
	if err != nil {
		return Workspace{}, fmt.Errorf("migrate %s: %w", nameOrID, err)
	}
	return ws, nil
}

func (r *Repo) migrateLegacy(ctx context.Context, nameOrID string) (Workspace, error) {
	unlock, err := r.lock.lock(ctx)
	if err != nil {
		return Workspace{}, err
	}
	defer unlock()
	ws, err := r.lookup(ctx, nameOrID)
	if err != nil {
		return Workspace{}, err
	}
	all, err := r.readAllStates(ctx)
	if err != nil {
		return Workspace{}, err
	}
	var legacy []noteState
	for _, ns := range all {
		if ns.st.ID == ws.ID && ns.st.Version == FormatLegacy {
			legacy = append(legacy, ns)
		}
	}
	if !ws.Legacy && len(legacy) == 0 && len(r.legacyAdminDirs(ws.Name)) == 0 {
		return ws, nil
	}

	cur := ws
	cur.Format, cur.Legacy, cur.LegacyPath = FormatCurrent, false, ""
	cur.Anchor = r.format.anchorID(ws.ID)

	// The log first (invisible without a state note), then the state note
	// (from then on the workspace lists as current), then the old notes.
	newLog, err := r.readNote(ctx, LogNotesRef, cur.Anchor)
	if err != nil {
		return Workspace{}, err
	}
	if newLog == "" {
		var b strings.Builder
		for _, ns := range legacy {
			old, err := r.readNote(ctx, LogNotesRef, ns.obj)
			if err != nil {
				return Workspace{}, err
			}
			b.WriteString(old)
			if old != "" && !strings.HasSuffix(old, "\n") {
				b.WriteByte('\n')
			}
		}
		b.WriteString(Event{Kind: EventMigrated, Message: fmt.Sprintf("from a legacy worktree; notes moved from start commit %s to anchor %s", ws.Anchor, cur.Anchor)}.withNow().String())
		b.WriteByte('\n')
		if err := r.writeAnchor(ctx, cur.ID); err != nil {
			return Workspace{}, err
		}
		if err := r.writeNote(ctx, LogNotesRef, cur.Anchor, []byte(b.String())); err != nil {
			return Workspace{}, err
		}
	}
	if ws.Legacy {
		if err := r.writeState(ctx, cur); err != nil {
			return Workspace{}, err
		}
	}
	for _, ns := range legacy {
		if err := r.removeNote(ctx, StateNotesRef, ns.obj); err != nil {
			return Workspace{}, err
		}
		if err := r.removeNote(ctx, LogNotesRef, ns.obj); err != nil {
			return Workspace{}, err
		}
	}
	removed, err := r.removeLegacyAdmin(ctx, ws.Name)
	if err != nil {
		return Workspace{}, err
	}
	r.logger.Info("workspace migrated", "workspace", ws.Name, "anchor", cur.Anchor, "admin_dirs_removed", len(removed))
	return cur, nil
}
