package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	pclient "github.com/patina-dev/patina/sidecar/client"
)

// Devcontainer times workspaces of a repository with a devcontainer.json
// (a Dockerfile FROM the bench's image with a RUN step, a
// postCreateCommand), each to its first exec: the first builds the
// template; a second starts from it; another, on a sidecar of its own
// with `serve --warm-template T=1` for that template, takes a pooled
// workspace of it. Target: the pooled second ≤ 1/10 of the first.
type Devcontainer struct {
	FirstMS  float64 `json:"first_ms"`
	SecondMS float64 `json:"second_ms"`
	PooledMS float64 `json:"pooled_ms"`
	// Ratio is PooledMS / FirstMS; NoPoolRatio SecondMS / FirstMS.
	Ratio       float64 `json:"ratio"`
	NoPoolRatio float64 `json:"no_pool_ratio"`
}

func (r *runner) devcontainer(ctx context.Context) (Devcontainer, error) {
	var d Devcontainer
	repo := filepath.Join(r.root, "devcontainer")
	files := map[string]string{
		".devcontainer/devcontainer.json": `{"build": {"dockerfile": "Dockerfile"}, "containerEnv": {"BENCH": "1"}, "postCreateCommand": "echo made > /opt/made"}`,
		// The run's time makes the content, and so the template, new.
		".devcontainer/Dockerfile": fmt.Sprintf("FROM %s\n# %d\nRUN echo built > /opt/built\n", r.o.Image, time.Now().UnixNano()),
	}
	for name, content := range files {
		p := filepath.Join(repo, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return d, err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return d, err
		}
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", "devcontainer"}} {
		c := exec.CommandContext(ctx, "git", append([]string{"-c", "user.name=bench", "-c", "user.email=bench@localhost"}, args...)...)
		c.Dir = repo
		if out, err := c.CombinedOutput(); err != nil {
			return d, fmt.Errorf("git %v: %v %s", args, err, out)
		}
	}
	var ids []string
	template := ""
	create := func(name string) (float64, error) {
		t0 := time.Now()
		ws, err := r.c.CreateWorkspace(ctx, pclient.CreateWorkspaceRequest{Name: name, Repo: repo})
		if err != nil {
			return 0, fmt.Errorf("create workspace %s: %w", name, err)
		}
		r.track(ws.ID)
		ids = append(ids, ws.ID)
		template = ws.Template
		if err := execTrue(ctx, r.c, ws.ID, "default"); err != nil {
			return 0, fmt.Errorf("first exec in %s: %w", name, err)
		}
		return ms(time.Since(t0)), nil
	}
	var err error
	if d.FirstMS, err = create("bench-dc-1"); err != nil {
		return d, err
	}
	if d.SecondMS, err = create("bench-dc-2"); err != nil {
		return d, err
	}
	d.NoPoolRatio = d.SecondMS / d.FirstMS
	if d.PooledMS, err = r.devcontainerPooled(ctx, repo, template); err != nil {
		return d, err
	}
	d.Ratio = d.PooledMS / d.FirstMS
	for _, id := range ids {
		if err := r.deleteWorkspace(ctx, id); err != nil {
			return d, err
		}
	}
	if template != "" {
		if err := r.c.DeleteTemplate(ctx, template); err != nil {
			return d, fmt.Errorf("remove the bench's template: %w", err)
		}
	}
	return d, nil
}

// devcontainerPooled times a create of the repository, to its first exec,
// on a sidecar of its own whose warm pool keeps one workspace of its
// template, and checks the pool served it. The sidecar and its containers
// are gone when it returns (the template can be removed).
func (r *runner) devcontainerPooled(ctx context.Context, repo, template string) (float64, error) {
	if template == "" {
		return 0, fmt.Errorf("the repository's workspaces named no template")
	}
	dir := filepath.Join(r.root, "devcontainer-pool-state")
	p, err := startSidecar(ctx, r.o.Binary, dir, filepath.Join(r.root, "devcontainer-pool.log"), r.o.Image, r.o.StartTimeout, "--warm-template", template+"=1")
	if err != nil {
		return 0, err
	}
	defer func() {
		p.stop()
		_ = removeContainers(context.WithoutCancel(ctx), r.api, dir)
	}()
	if err := waitPoolReady(ctx, p, 1, poolReadyWait); err != nil {
		return 0, err
	}
	c := pclient.New(p.Addr, p.Token, nil)
	t0 := time.Now()
	ws, err := c.CreateWorkspace(ctx, pclient.CreateWorkspaceRequest{Name: "bench-dc-pooled", Repo: repo})
	if err != nil {
		return 0, fmt.Errorf("create workspace bench-dc-pooled: %w", err)
	}
	if err := execTrue(ctx, c, ws.ID, "default"); err != nil {
		return 0, fmt.Errorf("first exec in bench-dc-pooled: %w", err)
	}
	took := ms(time.Since(t0))
	if taken, err := poolMetric(ctx, p, "patina_pool_taken_total"); err != nil || taken != 1 {
		return 0, fmt.Errorf("the warm pool of template %s served %d creates, want 1: %v", template, taken, err)
	}
	return took, c.DeleteWorkspace(ctx, ws.ID, pclient.DeleteOptions{})
}
