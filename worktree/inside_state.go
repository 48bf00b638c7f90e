package worktree

import (
	"context"
	"fmt"
)

// snapshotDate is the author and committer date of snapshot commits: fixed,
// so the same work gives the same snapshot id every time.
const snapshotDate = "@946684800 +0000"

// State reports the workspace's HEAD, its branch and a snapshot of
// everything in it: a commit (parent HEAD) of the tree `git add -A` would
// stage (tracked, modified, deleted and untracked files; not ignored ones),
// made through a temporary index so the real index is left as the agent
// made it. With nothing uncommitted, Snapshot is HEAD and Dirty is false.
// The snapshot commit is written to the workspace's own objects, where it
// is garbage once unused.
func (in *Inside) State(ctx context.Context) (State, error) {
	st, err := in.state(ctx)
	if err != nil {
		return State{}, fmt.Errorf("state %s: %w", in.Dir, err)
	}
	return st, nil
}

func (in *Inside) state(ctx context.Context) (State, error) {
	head, err := in.head(ctx)
	if err != nil {
		return State{}, err
	}
	branch, err := in.run(ctx, nil, "symbolic-ref", "-q", "--short", "HEAD")
	if err != nil && exitCode(err) != 1 {
		return State{}, err
	}
	idx, remove, err := in.tempIndex()
	if err != nil {
		return State{}, err
	}
	defer remove()
	env := []string{"GIT_INDEX_FILE=" + idx}
	if _, err := in.run(ctx, env, "add", "-A"); err != nil {
		return State{}, err
	}
	tree, err := in.run(ctx, env, "write-tree")
	if err != nil {
		return State{}, err
	}
	headTree, err := in.run(ctx, nil, "rev-parse", "--verify", head+"^{tree}")
	if err != nil {
		return State{}, err
	}
	st := State{Head: head, Branch: branch, Snapshot: head}
	if tree == headTree {
		return st, nil
	}
	g, err := in.runner()
	if err != nil {
		return State{}, err
	}
	c := in.cmd([]string{"GIT_AUTHOR_DATE=" + snapshotDate, "GIT_COMMITTER_DATE=" + snapshotDate},
		"commit-tree", tree, "-p", head, "-m", "patina: snapshot of uncommitted work")
	out, err := g.run(ctx, c)
	if err != nil {
		return State{}, err
	}
	st.Snapshot, st.Dirty = string(trimNL(out)), true
	return st, nil
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
