package workspace

import (
	"context"
	"errors"
	"fmt"

	"github.com/patina-dev/patina/sidecar/agent"
	"github.com/patina-dev/patina/sidecar/agent/wire"
)

// A workspace's own repository is the agent's, in the container, and
// whatever runs there may break it: delete its branch, remove or prune its
// objects, rm -rf .git. The work in its files is still there, and patina
// knows the base: diff, commit and merge re-seed such a repository at the
// base commit (files kept, so every change since the base shows as
// uncommitted) and say so in their answer. A sound repository is never
// touched: the agent re-seeds only one whose HEAD names no readable
// commit.

// gitStateRepairing is the agent's GitState, re-seeding a broken
// repository first; repaired says what was done ("" if nothing).
func (w *workspace) gitStateRepairing(ctx context.Context, c *agent.Client) (st wire.GitState, repaired string, err error) {
	st, err = c.GitState(ctx)
	if !errors.Is(err, wire.ErrConflict) {
		return st, "", err
	}
	repaired, rerr := w.reseed(ctx, c)
	if rerr != nil {
		return st, "", err
	}
	st2, err2 := c.GitState(ctx)
	if err2 != nil {
		return st, "", err // still broken: its own error says why
	}
	w.m.log.Warn("re-seeded a broken workspace repository", "workspace_id", w.id())
	w.mu.Lock()
	w.notice = repaired
	w.mu.Unlock()
	return st2, repaired, nil
}

// reseed has the agent re-seed the workspace's repository at its base
// commit if it is broken, and returns the notice an answer carries.
func (w *workspace) reseed(ctx context.Context, c *agent.Client) (string, error) {
	w.mu.Lock()
	md := w.meta
	w.mu.Unlock()
	alts := md.alternates()
	if md.Shipped {
		objects, err := w.shipObjects(ctx, c, md.BaseCommit)
		if err != nil {
			return "", err
		}
		alts = []string{objects}
	}
	a := w.m.cfg.GitAuthor
	if err := c.GitInit(ctx, wire.GitInitRequest{
		Branch: md.Branch, Base: md.BaseCommit, Alternates: alts, Reseed: true,
		UserName: a.Name, UserEmail: a.Email,
	}); err != nil {
		return "", err
	}
	notice := fmt.Sprintf("the workspace's own repository (/workspace/.git) was broken (its HEAD named no readable commit: "+
		"a branch deleted, objects removed or pruned, or .git removed), so it was made again at the base commit %s with the files kept: "+
		"every change since the base now shows as uncommitted; commits made in it that were never recorded are gone as commits, not as files", shortID(md.BaseCommit))
	return notice, nil
}
