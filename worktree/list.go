package worktree

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
)

// List returns every workspace of the repository, oldest first, as its
// state notes record them (legacy ones too, with Legacy set); this is how
// a restarted sidecar finds them again.
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
	heads, err := r.patinaHeads(ctx)
	if err != nil {
		return nil, err
	}
	list := make([]Workspace, 0, len(states))
	for _, ns := range states {
		list = append(list, r.newWorkspace(ns, heads[branchRef(ns.st.Name)]))
	}
	sort.Slice(list, func(i, j int) bool {
		if !list[i].CreatedAt.Equal(list[j].CreatedAt) {
			return list[i].CreatedAt.Before(list[j].CreatedAt)
		}
		return list[i].ID < list[j].ID
	})
	return list, nil
}

// newWorkspace is the workspace a state note describes, with head the
// current tip of its branch.
func (r *Repo) newWorkspace(ns noteState, head string) Workspace {
	st := ns.st
	ws := Workspace{
		ID:           st.ID,
		Name:         st.Name,
		Branch:       BranchPrefix + st.Name,
		Repo:         r.root,
		GitCommonDir: r.commonDir,
		ObjectDirs:   r.ObjectDirs(),
		BaseRef:      st.BaseRef,
		BaseCommit:   st.BaseCommit,
		Anchor:       ns.obj,
		Head:         head,
		CreatedAt:    st.CreatedAt,
		Image:        st.Image,
		Meta:         st.Meta,
		Format:       st.Version,
		Legacy:       st.Version == FormatLegacy,
	}
	if ws.Legacy {
		ws.LegacyPath = filepath.Join(r.wtRoot, st.Name)
	}
	return ws
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
