package daggerws

import (
	"context"
	"fmt"

	"github.com/patina-dev/patina/sidecar/client"
)

// DeleteRequest is what Delete needs.
type DeleteRequest struct {
	Workspace string
	// KeepBranch keeps the workspace's git branch (and its notes).
	KeepBranch bool
}

// Validate checks a request without calling the sidecar.
func (r DeleteRequest) Validate() error {
	if r.Workspace == "" {
		return ErrNoWorkspace
	}
	return nil
}

// Delete removes a workspace (container, sessions, worktree and, unless
// kept, its branch) and says so in one line.
func Delete(ctx context.Context, c API, req DeleteRequest) (string, error) {
	if err := req.Validate(); err != nil {
		return "", err
	}
	err := c.DeleteWorkspace(ctx, req.Workspace, client.DeleteOptions{KeepBranch: req.KeepBranch})
	if err != nil {
		return "", explain(c, fmt.Sprintf("delete workspace %q", req.Workspace), req.Workspace, err)
	}
	if req.KeepBranch {
		return fmt.Sprintf("deleted workspace %s (its branch is kept)\n", req.Workspace), nil
	}
	return fmt.Sprintf("deleted workspace %s\n", req.Workspace), nil
}
