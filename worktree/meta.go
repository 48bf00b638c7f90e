package worktree

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
)

// SetMeta replaces a workspace's opaque metadata (container and session
// details the sidecar keeps) and rewrites its state note whole. A nil or
// empty meta clears it. It returns the updated workspace.
func (r *Repo) SetMeta(ctx context.Context, nameOrID string, meta json.RawMessage) (Workspace, error) {
	meta, err := compactJSON(meta)
	if err != nil {
		return Workspace{}, fmt.Errorf("set meta %s: %w", nameOrID, err)
	}
	unlock, err := r.lock.lock(ctx)
	if err != nil {
		return Workspace{}, fmt.Errorf("set meta %s: %w", nameOrID, err)
	}
	defer unlock()
	ws, err := r.lookup(ctx, nameOrID)
	if err != nil {
		return Workspace{}, fmt.Errorf("set meta %s: %w", nameOrID, err)
	}
	ws.Meta = meta
	if err := r.writeState(ctx, ws); err != nil {
		return Workspace{}, fmt.Errorf("set meta %s: %w", nameOrID, err)
	}
	return ws, nil
}

// compactJSON checks raw and returns it compacted; empty stays nil.
func compactJSON(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, fmt.Errorf("meta is not valid JSON: %w", err)
	}
	return b.Bytes(), nil
}
