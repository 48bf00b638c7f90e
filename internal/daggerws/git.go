package daggerws

import (
	"context"
	"fmt"
	"strings"

	"github.com/patina-dev/patina/sidecar/client"
)

// DiffRequest is what Diff needs.
type DiffRequest struct {
	Workspace string
}

// Validate checks a request without calling the sidecar.
func (r DiffRequest) Validate() error {
	if r.Workspace == "" {
		return ErrNoWorkspace
	}
	return nil
}

// Diff returns the workspace's changes against its base (committed,
// uncommitted and untracked) as a unified diff; "" when there are none.
// When the sidecar cut the diff at its limit, a last line says so.
func Diff(ctx context.Context, c API, req DiffRequest) (string, error) {
	if err := req.Validate(); err != nil {
		return "", err
	}
	d, err := c.Diff(ctx, req.Workspace)
	if err != nil {
		return "", explain(c, fmt.Sprintf("diff of workspace %q", req.Workspace), req.Workspace, err)
	}
	text := d.Text
	if d.Truncated {
		if text != "" && !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		text += fmt.Sprintf("[patina: the diff is longer than the sidecar's limit and was cut here; %d files changed]\n", len(d.Files))
	}
	return text, nil
}

// CommitRequest is what Commit needs.
type CommitRequest struct {
	Workspace string
	Message   string
}

// Validate checks a request without calling the sidecar.
func (r CommitRequest) Validate() error {
	switch {
	case r.Workspace == "":
		return ErrNoWorkspace
	case strings.TrimSpace(r.Message) == "":
		return invalidf("a commit message is required (--message)")
	}
	return nil
}

// Commit stages everything in the workspace and commits it on its branch;
// nothing to commit is not an error.
func Commit(ctx context.Context, c API, req CommitRequest) (string, error) {
	if err := req.Validate(); err != nil {
		return "", err
	}
	res, err := c.Commit(ctx, req.Workspace, client.CommitRequest{Message: req.Message})
	if err != nil {
		return "", explain(c, fmt.Sprintf("commit in workspace %q", req.Workspace), req.Workspace, err)
	}
	if !res.Committed {
		return "nothing to commit\n", nil
	}
	return fmt.Sprintf("committed %s\n", short(res.Commit)), nil
}

// MergeRequest is what Merge needs.
type MergeRequest struct {
	Workspace string
	// Into is the branch to merge into (default: the one the workspace
	// was created from).
	Into string
}

// Validate checks a request without calling the sidecar.
func (r MergeRequest) Validate() error {
	if r.Workspace == "" {
		return ErrNoWorkspace
	}
	return nil
}

// Merge merges what the last Diff showed (the sidecar remembers it) into a
// branch of the repository and says which commit and how; a last line
// notes uncommitted changes, which are not merged. The sidecar refuses
// when nothing was diffed, or the workspace changed since the diff.
func Merge(ctx context.Context, c API, req MergeRequest) (string, error) {
	if err := req.Validate(); err != nil {
		return "", err
	}
	r, err := c.Merge(ctx, req.Workspace, client.MergeRequest{Into: req.Into})
	if err != nil {
		return "", explain(c, fmt.Sprintf("merge workspace %q", req.Workspace), req.Workspace, err)
	}
	var out string
	into := branch(r.Into)
	switch {
	case r.UpToDate:
		out = fmt.Sprintf("%s already has %s: up to date\n", into, short(r.Merged))
	case r.FastForward:
		out = fmt.Sprintf("merged %s: fast-forwarded %s: %s..%s\n", short(r.Merged), into, short(r.Previous), short(r.Commit))
	default:
		out = fmt.Sprintf("merged %s into %s: %s (was %s)\n", short(r.Merged), into, short(r.Commit), short(r.Previous))
	}
	if r.Uncommitted {
		out += "note: the workspace has uncommitted changes, which were not merged (commit them first)\n"
	}
	return out, nil
}
