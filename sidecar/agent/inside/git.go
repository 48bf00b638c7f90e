package inside

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"

	"github.com/patina-dev/patina/sidecar/agent/wire"
	"github.com/patina-dev/patina/worktree"
)

// WorkspaceGit is the workspace's own repository at workdir, run by
// package worktree's Inside with the container's git; objects shipped to
// it are kept in stateDir/base.git.
func WorkspaceGit(workdir, stateDir string, log *slog.Logger) Git {
	return insideGit{in: &worktree.Inside{Dir: workdir, Logger: log}, store: worktree.Store{Dir: filepath.Join(stateDir, "base.git")}}
}

type insideGit struct {
	in    *worktree.Inside
	store worktree.Store
}

func (g insideGit) Has(ctx context.Context, commit string) (wire.GitStore, error) {
	has, err := g.store.Has(ctx, commit)
	return wire.GitStore{Has: has, Objects: g.store.Objects()}, err
}

func (g insideGit) Receive(ctx context.Context, commit string, r io.Reader) (wire.GitStore, error) {
	if err := g.store.Receive(ctx, commit, r); err != nil {
		return wire.GitStore{}, err
	}
	return wire.GitStore{Has: true, Objects: g.store.Objects()}, nil
}

func (g insideGit) Init(ctx context.Context, req wire.GitInitRequest) error {
	ireq := worktree.InitRequest{Branch: req.Branch, Base: req.Base, Alternates: req.Alternates, KeepFiles: req.KeepFiles, Rename: req.Rename, Reseed: req.Reseed}
	if req.UserName != "" && req.UserEmail != "" {
		ireq.Identity = &worktree.Signature{Name: req.UserName, Email: req.UserEmail}
	}
	_, err := g.in.Init(ctx, ireq)
	return err
}

func (g insideGit) State(ctx context.Context) (wire.GitState, error) {
	st, err := g.in.State(ctx)
	if err != nil {
		return wire.GitState{}, err
	}
	return wire.GitState{Head: st.Head, Branch: st.Branch, Snapshot: st.Snapshot, Dirty: st.Dirty}, nil
}

func (g insideGit) Commit(ctx context.Context, req wire.GitCommitRequest) (wire.GitCommitResult, error) {
	creq := worktree.CommitRequest{Message: req.Message}
	if req.AuthorName != "" && req.AuthorEmail != "" {
		creq.Author = &worktree.Signature{Name: req.AuthorName, Email: req.AuthorEmail}
	}
	res, err := g.in.Commit(ctx, creq)
	if err != nil {
		return wire.GitCommitResult{}, err
	}
	return wire.GitCommitResult{Commit: res.Commit, Committed: res.Committed}, nil
}

func (g insideGit) Pack(ctx context.Context, want, have []string, w io.Writer) error {
	return g.in.Pack(ctx, want, have, w)
}
