package workspace

import (
	"context"
	"fmt"
	"io"
	"path"
	"time"

	"github.com/patina-dev/patina/sidecar/agent"
)

// A repository workspace whose engine is not on the sidecar's host (a
// remote DOCKER_HOST, a Swarm node) cannot mount the user's objects or a
// host directory: its files live in its own volume, and the objects of its
// base commit are shipped to it over its agent's channel into a store in
// its state volume, which its repository borrows from. Everything that
// comes back (diff, commit, merge, apply) goes through the same checked
// path as for a local workspace: worktree.Repo.Record and friends.

// shipTimeout bounds sending a repository's objects to a workspace.
const shipTimeout = 15 * time.Minute

// shipObjects makes sure the workspace's store has commit and everything
// it reaches, sending a pack of it if not, and returns the store's object
// directory (a path in the workspace) for its repository's alternates.
func (w *workspace) shipObjects(ctx context.Context, c *agent.Client, commit string) (string, error) {
	st, err := c.GitHas(ctx, commit)
	if err != nil {
		return "", fmt.Errorf("ask the workspace for its shipped objects: %w", w.explain(err))
	}
	if !st.Has {
		ctx, cancel := context.WithTimeout(ctx, shipTimeout)
		defer cancel()
		start := time.Now()
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(w.repo.PackCommit(ctx, commit, pw)) }()
		counted := &countingReader{r: pr}
		st, err = c.GitReceive(ctx, commit, counted)
		pr.CloseWithError(io.ErrClosedPipe) // ends the packer if the agent stopped reading
		if err != nil {
			return "", fmt.Errorf("ship the repository's objects to the workspace: %w", w.explain(err))
		}
		w.m.log.Info("shipped the repository's objects", "workspace_id", w.id(), "commit", commit, "bytes", counted.n, "took", time.Since(start).Round(time.Millisecond))
	}
	// The path is the agent's word, used only inside the workspace (its
	// alternates file); Init refuses what is not an absolute path on one
	// line.
	if st.Objects == "" || !path.IsAbs(st.Objects) {
		return "", fmt.Errorf("%w: the agent named no usable object store (%q)", agent.ErrUnavailable, st.Objects)
	}
	return st.Objects, nil
}

// countingReader counts what is read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
