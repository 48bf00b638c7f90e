package worktree

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// cleanupTimeout bounds the rollback of a failed Create and similar
// clean-ups, which run even when the caller's context is done.
const cleanupTimeout = 30 * time.Second

// Create makes a workspace in the user's repository: branch patina/<name>
// at the base commit itself, an anchor blob of its own, and on the anchor
// the state note and a log note saying "created". Its files and its
// repository inside the container are the sidecar's (Inside.Init). The
// user's index and working tree are not touched. On failure everything
// made so far is undone.
func (r *Repo) Create(ctx context.Context, req CreateRequest) (Workspace, error) {
	ws, err := r.create(ctx, req)
	if err != nil {
		op := "create"
		if req.Name != "" {
			op += " " + req.Name
		}
		return Workspace{}, fmt.Errorf("%s: %w", op, err)
	}
	r.logger.Info("workspace created", "workspace", ws.Name, "workspace_id", ws.ID, "base_commit", ws.BaseCommit)
	return ws, nil
}

func (r *Repo) create(ctx context.Context, req CreateRequest) (Workspace, error) {
	if req.Name != "" {
		if err := ValidateName(req.Name); err != nil {
			return Workspace{}, err
		}
	}
	if req.Base != "" {
		if err := validateRev(req.Base); err != nil {
			return Workspace{}, err
		}
	}
	meta, err := compactJSON(req.Meta)
	if err != nil {
		return Workspace{}, err
	}

	unlock, err := r.lock.lock(ctx)
	if err != nil {
		return Workspace{}, err
	}
	defer unlock()

	existing, err := r.readStates(ctx)
	if err != nil {
		return Workspace{}, err
	}
	if req.ID != "" {
		if !isUUID(req.ID) {
			return Workspace{}, fmt.Errorf("id %q is not a uuid", req.ID)
		}
		for _, ns := range existing {
			if ns.st.ID == req.ID {
				return Workspace{}, fmt.Errorf("%w: workspace id %s", ErrExists, req.ID)
			}
		}
	}
	id, name := newIdentity()
	if req.Name != "" {
		name = req.Name
		if err := r.checkFree(ctx, name, existing); err != nil {
			return Workspace{}, err
		}
	} else {
		for try := 0; ; try++ {
			err := r.checkFree(ctx, name, existing)
			if err == nil {
				break
			}
			if !errors.Is(err, ErrExists) || try == 10 {
				return Workspace{}, err
			}
			id, name = newIdentity()
		}
	}
	if req.ID != "" {
		id = req.ID
	}

	baseCommit, baseRef, err := r.resolveBase(ctx, req.Base)
	if err != nil {
		return Workspace{}, err
	}
	if baseRef == "" && req.Target != "" {
		if baseRef, err = validateBranch(req.Target); err != nil {
			return Workspace{}, err
		}
	}

	ws := r.newWorkspace(noteState{
		obj: r.format.anchorID(id),
		st: stateNote{
			Version:    FormatCurrent,
			ID:         id,
			Name:       name,
			Branch:     BranchPrefix + name,
			BaseRef:    baseRef,
			BaseCommit: baseCommit,
			CreatedAt:  time.Now().UTC(),
			Image:      req.Image,
			Meta:       meta,
		},
	}, baseCommit)

	var undo []func(context.Context)
	ok := false
	defer func() {
		if ok {
			return
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i](cctx)
		}
	}()

	ref := branchRef(name)
	// An empty old value makes update-ref fail if the branch appeared.
	if _, err := r.run(ctx, "update-ref", "-m", "patina: create workspace "+name, ref, baseCommit, ""); err != nil {
		return Workspace{}, fmt.Errorf("create branch %s: %w", ws.Branch, err)
	}
	undo = append(undo, func(ctx context.Context) {
		if _, err := r.run(ctx, "update-ref", "-d", ref, baseCommit); err != nil {
			r.logger.Warn("rollback: delete branch", "branch", ws.Branch, "err", err)
		}
	})

	if err := r.writeState(ctx, ws); err != nil {
		return Workspace{}, err
	}
	undo = append(undo, func(ctx context.Context) {
		if err := r.removeNote(ctx, StateNotesRef, ws.Anchor); err != nil {
			r.logger.Warn("rollback: remove state note", "anchor", ws.Anchor, "err", err)
		}
	})

	base := baseRef
	if base == "" {
		base = "detached"
	}
	created := fmt.Sprintf("branch %s from %s at %s", ws.Branch, base, baseCommit)
	if ws.Image != "" {
		created += ", image " + ws.Image
	}
	// A new workspace has no log yet: write it rather than append.
	line := Event{Time: ws.CreatedAt, Kind: EventCreated, Message: created}.String() + "\n"
	if err := r.writeNote(ctx, LogNotesRef, ws.Anchor, []byte(line)); err != nil {
		return Workspace{}, err
	}
	ok = true
	return ws, nil
}

// checkFree fails with ErrExists if name is taken by a workspace or a
// branch.
func (r *Repo) checkFree(ctx context.Context, name string, existing []noteState) error {
	for _, ns := range existing {
		if ns.st.Name == name {
			return fmt.Errorf("%w: workspace %q", ErrExists, name)
		}
	}
	exists, err := r.refExists(ctx, branchRef(name))
	if err != nil {
		return err
	}
	if exists {
		return fmt.Errorf("%w: branch %s%s (kept from a deleted workspace?)", ErrExists, BranchPrefix, name)
	}
	return nil
}

// resolveBase resolves the create base: the commit, and the full ref when
// base names one ("" for a detached HEAD or a plain commit).
func (r *Repo) resolveBase(ctx context.Context, base string) (commit, ref string, err error) {
	rev := base
	if rev == "" {
		rev = "HEAD"
	}
	commit, err = r.revParse(ctx, nil, rev+"^{commit}")
	if errors.Is(err, ErrNotFound) && base == "" {
		return "", "", fmt.Errorf("%w: the repository has no commits yet (HEAD is unborn); commit something first", ErrUnsupported)
	}
	if err != nil {
		return "", "", fmt.Errorf("base: %w", err)
	}
	ref, err = r.run(ctx, "rev-parse", "--verify", "--symbolic-full-name", "--end-of-options", rev)
	if err != nil {
		// Not a ref (e.g. "HEAD~2"): the commit alone is the base.
		ref = ""
	}
	if ref == "HEAD" || strings.Contains(ref, "\n") {
		ref = ""
	}
	return commit, ref, nil
}
