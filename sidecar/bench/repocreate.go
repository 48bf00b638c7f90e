package bench

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"time"

	pclient "github.com/patina-dev/patina/sidecar/client"
)

// RepoCreate times creating workspaces of a repository of Files files and
// PackBytes of packed history (RepoSpec's shape), each to its first exec:
// the first of its base (its object store is made), a second of the same
// base (the store is shared), and one of a later base (the user committed
// once more: its store extends the first).
type RepoCreate struct {
	Files     int     `json:"files"`
	PackBytes int64   `json:"pack_bytes"`
	FirstMS   float64 `json:"first_ms"`
	SecondMS  float64 `json:"second_ms"`
	LaterMS   float64 `json:"later_base_ms"`
}

func (r *runner) repoCreate(ctx context.Context) (RepoCreate, error) {
	rc := RepoCreate{Files: r.o.GitFiles}
	repo := filepath.Join(r.root, "repo-create")
	if err := MakeRepo(ctx, RepoSpec{Dir: repo, Files: r.o.GitFiles, HistoryBytes: r.o.RepoHistoryBytes, Seed: 1}); err != nil {
		return rc, fmt.Errorf("make the repository: %w", err)
	}
	rc.PackBytes = RepoPackBytes(repo)
	var ids []string
	create := func(name string) (float64, error) {
		t0 := time.Now()
		ws, err := r.c.CreateWorkspace(ctx, pclient.CreateWorkspaceRequest{Name: name, Repo: repo, Image: r.o.Image})
		if err != nil {
			return 0, fmt.Errorf("create workspace %s: %w", name, err)
		}
		r.track(ws.ID)
		ids = append(ids, ws.ID)
		if err := execTrue(ctx, r.c, ws.ID, "default"); err != nil {
			return 0, fmt.Errorf("first exec in %s: %w", name, err)
		}
		return ms(time.Since(t0)), nil
	}
	var err error
	if rc.FirstMS, err = create("bench-repo-1"); err != nil {
		return rc, err
	}
	if rc.SecondMS, err = create("bench-repo-2"); err != nil {
		return rc, err
	}
	c := exec.CommandContext(ctx, "git", "-c", "user.name=bench", "-c", "user.email=bench@localhost", "commit", "-q", "--allow-empty", "-m", "later")
	c.Dir = repo
	if out, err := c.CombinedOutput(); err != nil {
		return rc, fmt.Errorf("commit in the repository: %v %s", err, out)
	}
	if rc.LaterMS, err = create("bench-repo-3"); err != nil {
		return rc, err
	}
	for _, id := range ids {
		if err := r.deleteWorkspace(ctx, id); err != nil {
			return rc, err
		}
	}
	return rc, nil
}
