package agent

import (
	"context"
	"io"
	"log/slog"

	"github.com/patina-dev/patina/worktree"
)

// WorkspaceGit is the workspace's own repository at workdir, run by
// package worktree's Inside with the container's git.
func WorkspaceGit(workdir string, log *slog.Logger) Git {
	return insideGit{in: &worktree.Inside{Dir: workdir, Logger: log}}
}

type insideGit struct{ in *worktree.Inside }

func (g insideGit) Init(ctx context.Context, req GitInitRequest) error {
	ireq := worktree.InitRequest{Branch: req.Branch, Base: req.Base, Alternates: req.Alternates, KeepFiles: req.KeepFiles, Rename: req.Rename}
	if req.UserName != "" && req.UserEmail != "" {
		ireq.Identity = &worktree.Signature{Name: req.UserName, Email: req.UserEmail}
	}
	_, err := g.in.Init(ctx, ireq)
	return err
}

func (g insideGit) State(ctx context.Context) (GitState, error) {
	st, err := g.in.State(ctx)
	if err != nil {
		return GitState{}, err
	}
	return GitState{Head: st.Head, Branch: st.Branch, Snapshot: st.Snapshot, Dirty: st.Dirty}, nil
}

func (g insideGit) Commit(ctx context.Context, req GitCommitRequest) (GitCommitResult, error) {
	creq := worktree.CommitRequest{Message: req.Message}
	if req.AuthorName != "" && req.AuthorEmail != "" {
		creq.Author = &worktree.Signature{Name: req.AuthorName, Email: req.AuthorEmail}
	}
	res, err := g.in.Commit(ctx, creq)
	if err != nil {
		return GitCommitResult{}, err
	}
	return GitCommitResult{Commit: res.Commit, Committed: res.Committed}, nil
}

func (g insideGit) Pack(ctx context.Context, want, have []string, w io.Writer) error {
	return g.in.Pack(ctx, want, have, w)
}
