package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/patina-dev/patina/sidecar/agent"
	"github.com/patina-dev/patina/sidecar/agent/wire"
	"github.com/patina-dev/patina/worktree"
)

// A repository workspace has two repositories: the user's, on the host,
// which only patina writes (package worktree), and its own, inside the
// container (/workspace/.git), which the agent runs and which borrows the
// user's objects read-only. Its branch patina/<name> in the user's
// repository moves only when patina records the workspace's HEAD: at
// commit and merge. Diff shows the workspace's HEAD plus its uncommitted
// work without writing the user's repository.

// agentSource gives the worktree package a workspace's objects, packed by
// its agent; worktree checks everything it receives.
type agentSource struct{ c *agent.Client }

func (s agentSource) Pack(ctx context.Context, want, have []string) (io.ReadCloser, error) {
	return s.c.GitPack(ctx, want, have)
}

// gitWorkspace resolves a running repository workspace and its agent.
func (m *Manager) gitWorkspace(ctx context.Context, idOrName string) (*workspace, *worktree.Repo, *agent.Client, error) {
	w, err := m.ready(ctx, idOrName)
	if err != nil {
		return nil, nil, nil, err
	}
	w.mu.Lock()
	repo, name := w.repo, w.meta.Name
	w.mu.Unlock()
	if repo == nil {
		return nil, nil, nil, fmt.Errorf("%w: workspace %s was created without a repo", ErrNoRepository, name)
	}
	c, err := w.client()
	if err != nil {
		return nil, nil, nil, err
	}
	// Git operations log their own events: write the queued command events
	// first, so the log stays in order.
	w.log.flush(ctx)
	return w, repo, c, nil
}

// gitInit makes /workspace the workspace's own repository (idempotent:
// an existing one is kept, its alternates rewritten). keepFiles keeps the
// files already there (a migrated worktree).
func (w *workspace) gitInit(ctx context.Context, keepFiles bool) error {
	w.mu.Lock()
	md, c := w.meta, w.agent
	w.mu.Unlock()
	alts := md.alternates()
	if md.Shipped {
		objects, err := w.shipObjects(ctx, c, md.BaseCommit)
		if err != nil {
			return err
		}
		alts = []string{objects}
	}
	base := md.BaseCommit
	if keepFiles && w.repo != nil {
		if wt, err := w.repo.Get(ctx, md.ID); err == nil && wt.Head != "" {
			base = wt.Head
		}
	}
	a := w.m.cfg.GitAuthor
	err := c.GitInit(ctx, wire.GitInitRequest{
		Branch: md.Branch, Base: base, Alternates: alts, KeepFiles: keepFiles, Rename: md.ForkOf != "",
		UserName: a.Name, UserEmail: a.Email,
	})
	if err != nil {
		return fmt.Errorf("set up the workspace's repository: %w", w.explain(err))
	}
	return nil
}

// Diff shows what the workspace changed against its base: its HEAD's
// commits plus its uncommitted and untracked work. It writes nothing to
// the user's repository; the sidecar keeps what it showed, which a merge
// that names no commit takes (review.go).
func (m *Manager) Diff(ctx context.Context, idOrName string) (DiffResult, error) {
	w, repo, c, err := m.gitWorkspace(ctx, idOrName)
	if err != nil {
		return DiffResult{}, err
	}
	st, repaired, err := w.gitStateRepairing(ctx, c)
	if err != nil {
		return DiffResult{}, w.explain(err)
	}
	d, err := repo.Diff(ctx, w.id(), worktree.DiffRequest{
		Head: st.Head, Snapshot: st.Snapshot, Source: agentSource{c}, MaxText: m.cfg.DiffLimit,
	})
	if err != nil {
		return DiffResult{}, err
	}
	if err := w.reviewDiff(d); err != nil {
		return DiffResult{}, err
	}
	return diffResult(d, repaired), nil
}

// Commit commits everything uncommitted in the workspace (inside its own
// repository), then records its HEAD: the branch patina/<name> moves to it
// once its objects are in the user's repository and checked.
func (m *Manager) Commit(ctx context.Context, idOrName string, req CommitRequest) (CommitResult, error) {
	w, repo, c, err := m.gitWorkspace(ctx, idOrName)
	if err != nil {
		return CommitResult{}, err
	}
	unlock, err := w.lock(ctx)
	if err != nil {
		return CommitResult{}, err
	}
	defer unlock()
	_, repaired, err := w.gitStateRepairing(ctx, c)
	if err != nil {
		return CommitResult{}, w.explain(err)
	}
	creq := wire.GitCommitRequest{Message: req.Message}
	if req.Author != nil {
		creq.AuthorName, creq.AuthorEmail = req.Author.Name, req.Author.Email
	}
	res, err := c.GitCommit(ctx, creq)
	if err != nil {
		return CommitResult{}, w.explain(err)
	}
	if res.Commit == "" {
		return CommitResult{}, fmt.Errorf("%w: the workspace's repository has no commit", wire.ErrConflict)
	}
	if res.Committed {
		w.log.add(worktree.Event{Kind: worktree.EventCommitted, Message: res.Commit + " " + firstLine(req.Message)})
		w.log.flush(ctx)
	}
	if _, err := repo.Record(ctx, w.id(), worktree.RecordRequest{Head: res.Commit, Source: agentSource{c}}); err != nil {
		return CommitResult{}, err
	}
	reviewed, err := w.reviewCommit(ctx, repo, res.Commit)
	if err != nil {
		m.log.Warn("commit: compare with what was reviewed", "workspace_id", w.id(), "err", err)
	}
	return CommitResult{Commit: res.Commit, Committed: res.Committed, Reviewed: reviewed, Repaired: repaired}, nil
}

// Merge merges exactly one commit of the workspace into req.Into
// (default: the branch it came from): req.Commit, whole or abbreviated,
// which must be on the workspace's branch; else the commit last reviewed
// (review.go), refused while the workspace's HEAD is elsewhere or when
// what was reviewed held uncommitted work. The workspace's HEAD is
// recorded first (commits made inside with git commit included), so that
// a commit a diff showed is in the user's repository. Uncommitted work is
// never merged (said in the result).
func (m *Manager) Merge(ctx context.Context, idOrName string, req MergeRequest) (MergeResult, error) {
	w, repo, c, err := m.gitWorkspace(ctx, idOrName)
	if err != nil {
		return MergeResult{}, err
	}
	unlock, err := w.lock(ctx)
	if err != nil {
		return MergeResult{}, err
	}
	defer unlock()
	st, repaired, err := w.gitStateRepairing(ctx, c)
	if err != nil {
		return MergeResult{}, w.explain(err)
	}
	if repaired != "" && req.Commit == "" {
		return MergeResult{}, &reviewError{ErrUnreviewed, repaired + "; look at the diff (patina ws diff), commit, then merge"}
	}
	var commit string
	if req.Commit == "" {
		// Refused before anything is recorded.
		if commit, err = w.reviewedCommit(st.Head); err != nil {
			return MergeResult{}, err
		}
	}
	if st.Head != "" {
		if _, err := repo.Record(ctx, w.id(), worktree.RecordRequest{Head: st.Head, Source: agentSource{c}}); err != nil {
			return MergeResult{}, err
		}
	}
	if req.Commit != "" {
		if commit, err = w.resolveCommit(ctx, repo, req.Commit); err != nil {
			return MergeResult{}, err
		}
	}
	res, err := repo.Merge(ctx, w.id(), worktree.MergeRequest{Into: req.Into, Commit: commit})
	if req.Into != "" && errors.Is(err, worktree.ErrNotFound) {
		err = fieldError("into", err) // a field names nothing: 400, not 404
	}
	if errors.Is(err, worktree.ErrNotOnBranch) {
		name := w.name()
		err = &reviewError{ErrInvalid, fmt.Sprintf("commit %s is not on workspace %s's branch patina/%s: name one of its commits (patina ws diff %s names its head)",
			req.Commit, name, name, name)}
	}
	if err != nil {
		return MergeResult{}, err
	}
	return mergeResult(res, st.Dirty), nil
}

// resolveCommit expands a commit id a merge request names, in the user's
// repository; what names no commit, or several, is ErrInvalid.
func (w *workspace) resolveCommit(ctx context.Context, repo *worktree.Repo, id string) (string, error) {
	full, err := repo.ResolveCommit(ctx, id)
	name := w.name()
	var ae *worktree.AmbiguousError
	var ne *worktree.NameError
	switch {
	case err == nil:
		return full, nil
	case errors.As(err, &ae):
		return "", &reviewError{ErrInvalid, ae.Error()}
	case errors.As(err, &ne):
		return "", &reviewError{ErrInvalid, fmt.Sprintf("commit %q is not a commit id: %s", id, ne.Rule)}
	case errors.Is(err, worktree.ErrNotFound):
		return "", &reviewError{ErrInvalid, fmt.Sprintf("no commit %s in the repository of workspace %s: name one of its branch's commits (patina ws diff %s names its head)", id, name, name)}
	}
	return "", err
}

// Apply stages what Diff shows in the user's main working tree, without
// committing.
func (m *Manager) Apply(ctx context.Context, idOrName string) (ApplyResult, error) {
	w, repo, c, err := m.gitWorkspace(ctx, idOrName)
	if err != nil {
		return ApplyResult{}, err
	}
	unlock, err := w.lock(ctx)
	if err != nil {
		return ApplyResult{}, err
	}
	defer unlock()
	st, err := c.GitState(ctx)
	if err != nil {
		return ApplyResult{}, w.explain(err)
	}
	res, err := repo.Apply(ctx, w.id(), worktree.ApplyRequest{Snapshot: st.Snapshot, Source: agentSource{c}})
	return applyResult(res), err
}

// Log returns the workspace's log: its note for a repository workspace, a
// file of the sidecar's for a scratch one.
func (m *Manager) Log(ctx context.Context, idOrName string) ([]LogEntry, error) {
	w, err := m.ready(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	l := w.log
	w.mu.Unlock()
	if l == nil {
		return nil, nil
	}
	evs, err := l.read(ctx)
	return logEntries(evs), err
}

func firstLine(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}
