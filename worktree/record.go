package worktree

import (
	"context"
	"fmt"
)

// Record moves the workspace's branch to req.Head, the workspace's HEAD:
// the objects the repository lacks are read from req.Source into a
// quarantine and checked there (a valid pack, git's fsck checks, the size
// limits, Head a commit, everything it reaches present); only then are
// they moved into the user's objects and the branch moved with a
// compare-and-swap. Anything refused fails with ErrRejected or ErrTooLarge
// (a cancelled context as such) and leaves the user's refs, objects,
// config and hooks exactly as they were.
//
// Merge merges what was last recorded; the sidecar records before it
// shows a diff meant for review and before it merges.
func (r *Repo) Record(ctx context.Context, nameOrID string, req RecordRequest) (RecordResult, error) {
	res, err := r.record(ctx, nameOrID, req)
	if err != nil {
		return RecordResult{}, fmt.Errorf("record %s: %w", nameOrID, err)
	}
	return res, nil
}

func (r *Repo) record(ctx context.Context, nameOrID string, req RecordRequest) (RecordResult, error) {
	if err := r.format.checkOID("head", req.Head); err != nil {
		return RecordResult{}, err
	}
	ws, err := r.lookup(ctx, nameOrID)
	if err != nil {
		return RecordResult{}, err
	}
	// The transfer runs without the repository lock: it may be long, and
	// its quarantine is private. The lock covers the migration and the
	// ref update.
	q, err := r.fetch(ctx, req.Source, []string{req.Head}, r.haves(ctx, ws))
	if err != nil {
		return RecordResult{}, err
	}
	defer q.remove()

	unlock, err := r.lock.lock(ctx)
	if err != nil {
		return RecordResult{}, err
	}
	defer unlock()
	if ws, err = r.lookup(ctx, ws.ID); err != nil {
		return RecordResult{}, err
	}
	if err := r.migrate(q); err != nil {
		return RecordResult{}, err
	}
	res := RecordResult{Previous: ws.Head, Head: req.Head}
	if ws.Head == req.Head {
		return res, nil
	}
	// Compare-and-swap on the tip just read ("" : the branch must not
	// exist, if it was deleted behind patina's back).
	if _, err := r.run(ctx, "update-ref", "-m", "patina: record workspace "+ws.Name, branchRef(ws.Name), req.Head, ws.Head); err != nil {
		return RecordResult{}, fmt.Errorf("move branch %s: %w", ws.Branch, err)
	}
	res.Moved = true
	r.logEvent(ctx, ws, Event{Kind: EventRecorded, Message: fmt.Sprintf("%s at %s", ws.Branch, req.Head)})
	r.logger.Info("workspace recorded", "workspace", ws.Name, "head", req.Head, "previous", ws.Head)
	return res, nil
}
