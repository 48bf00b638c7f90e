package daggerws

import (
	"context"
	"fmt"
	"path"
	"strings"
	"text/tabwriter"

	"github.com/patina-dev/patina/sidecar/client"
)

// CreateRequest is what Create needs.
type CreateRequest struct {
	// Name names the workspace; the sidecar generates one when empty.
	Name string
	// Repo is an absolute path to a git repository on the sidecar's
	// machine (not a Dagger directory). Empty: a scratch workspace.
	Repo string
	// Base is the ref the workspace's branch starts from (needs Repo).
	Base string
	// Image is the workspace's container image; empty: the sidecar's
	// default.
	Image string
}

// Validate checks a request without calling the sidecar.
func (r CreateRequest) Validate() error {
	if r.Repo != "" && !path.IsAbs(r.Repo) {
		return invalidf("repo %q: give an absolute path on the machine where `patina serve` runs, "+
			"e.g. --repo \"$PWD\" (the sidecar opens it there; it is not uploaded)", r.Repo)
	}
	if r.Base != "" && r.Repo == "" {
		return invalidf("base %q needs --repo", r.Base)
	}
	return nil
}

// Create creates a workspace and describes it: "key: value" lines, the
// first being "name: <name>".
func Create(ctx context.Context, c API, req CreateRequest) (string, error) {
	if err := req.Validate(); err != nil {
		return "", err
	}
	w, err := c.CreateWorkspace(ctx, client.CreateWorkspaceRequest{Name: req.Name, Repo: req.Repo, Base: req.Base, Image: req.Image})
	if err != nil {
		op := "create workspace"
		if req.Name != "" {
			op = fmt.Sprintf("create workspace %q", req.Name)
		}
		return "", explain(c, op, "", err)
	}
	return describe(w), nil
}

// describe is Create's answer.
func describe(w client.Workspace) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 1, ' ', 0)
	line := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, v)
		}
	}
	line("name", w.Name)
	line("id", w.ID)
	line("status", w.Status)
	line("branch", w.Branch)
	base := branch(w.Base)
	if w.BaseCommit != "" {
		base = strings.TrimSpace(base + " (" + short(w.BaseCommit) + ")")
	}
	line("base", base)
	line("repo", w.Repo)
	if w.Worktree != "" {
		line("worktree", w.Worktree+" (on the sidecar's machine; /workspace in the container)")
	}
	line("image", w.Image)
	tw.Flush()
	return b.String()
}
