package worktree

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// List returns every workspace of the repository, oldest first, as its
// state notes record them; this is how a restarted sidecar finds them
// again. A workspace whose worktree directory has vanished has Missing set.
func (r *Repo) List(ctx context.Context) ([]Workspace, error) {
	list, err := r.list(ctx)
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	return list, nil
}

// Get returns the workspace with the given name or, failing that, id.
func (r *Repo) Get(ctx context.Context, nameOrID string) (Workspace, error) {
	ws, err := r.lookup(ctx, nameOrID)
	if err != nil {
		return Workspace{}, fmt.Errorf("get %s: %w", nameOrID, err)
	}
	return ws, nil
}

func (r *Repo) list(ctx context.Context) ([]Workspace, error) {
	states, err := r.readStates(ctx)
	if err != nil {
		return nil, err
	}
	if len(states) == 0 {
		return nil, nil
	}
	wts, err := listWorktrees(ctx, r.git, r.root)
	if err != nil {
		return nil, err
	}
	heads, err := r.patinaHeads(ctx)
	if err != nil {
		return nil, err
	}
	list := make([]Workspace, 0, len(states))
	for _, ns := range states {
		list = append(list, r.workspace(ns, wts, heads))
	}
	sort.Slice(list, func(i, j int) bool {
		if !list[i].CreatedAt.Equal(list[j].CreatedAt) {
			return list[i].CreatedAt.Before(list[j].CreatedAt)
		}
		return list[i].ID < list[j].ID
	})
	return list, nil
}

// workspace joins a state note with git's worktrees and branch tips.
func (r *Repo) workspace(ns noteState, wts []worktreeEntry, heads map[string]string) Workspace {
	st := ns.st
	ref := branchRef(st.Name)
	ws := Workspace{
		ID:           st.ID,
		Name:         st.Name,
		Branch:       BranchPrefix + st.Name,
		Path:         r.pathFor(st.Name),
		Repo:         r.root,
		GitCommonDir: r.commonDir,
		BaseRef:      st.BaseRef,
		BaseCommit:   st.BaseCommit,
		Commit:       ns.commit,
		Head:         heads[ref],
		CreatedAt:    st.CreatedAt,
		Image:        st.Image,
		Meta:         st.Meta,
	}
	// The worktree may have been created by a process with another state
	// dir: git knows where it is. Only a patina-made worktree counts
	// (.../worktrees/<repo-key>/<name>), never one of the user's that has
	// the branch checked out: Commit must not `git add -A` in the user's tree.
	for _, wt := range wts {
		if wt.branch == ref && !wt.bare && filepath.Base(wt.path) == st.Name && filepath.Base(filepath.Dir(wt.path)) == r.key {
			ws.Path = wt.path
			break
		}
	}
	ws.Missing = !isWorktreeDir(ws.Path)
	if !ws.Missing {
		ws.GitDir, _ = r.adminDir(ws.Path)
	}
	return ws
}

// isWorktreeDir reports whether dir exists and has a .git entry.
func isWorktreeDir(dir string) bool {
	_, err := os.Lstat(filepath.Join(dir, ".git"))
	return err == nil
}

// patinaHeads maps the full ref of every patina/ branch to its tip.
func (r *Repo) patinaHeads(ctx context.Context) (map[string]string, error) {
	out, err := r.run(ctx, "for-each-ref", "--format=%(objectname) %(refname)", "refs/heads/"+BranchPrefix)
	if err != nil {
		return nil, err
	}
	heads := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if oid, ref, ok := strings.Cut(line, " "); ok {
			heads[ref] = oid
		}
	}
	return heads, nil
}

// lookup finds a workspace by name, then by id. A key that is neither a
// valid name nor a uuid is refused with the name's validation error.
func (r *Repo) lookup(ctx context.Context, key string) (Workspace, error) {
	if !isUUID(key) {
		if err := ValidateName(key); err != nil {
			return Workspace{}, err
		}
	}
	list, err := r.list(ctx)
	if err != nil {
		return Workspace{}, err
	}
	for _, ws := range list {
		if ws.Name == key {
			return ws, nil
		}
	}
	for _, ws := range list {
		if ws.ID == key {
			return ws, nil
		}
	}
	return Workspace{}, fmt.Errorf("%w: no workspace %q", ErrNotFound, key)
}
