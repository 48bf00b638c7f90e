package workspace

import (
	"context"
	"fmt"

	"github.com/patina-dev/patina/sidecar/agent/wire"
	"github.com/patina-dev/patina/sidecar/template"
)

// Snapshot saves a running workspace as the template req.Name: its
// container's filesystem (installed packages, files under /root...), its
// files (/workspace, a git repository made in it included) and its sessions' state
// (history, and each shell's last cwd, variables, functions, aliases and
// options). A workspace created with that template starts with all of it,
// each session in a new shell restored from its state; running processes
// are not carried. The workspace is paused while it is copied, and is not
// changed.
//
// A workspace holding secrets or secret environment variables is refused:
// its sessions' state may hold their values, and a template is readable
// by whoever can use this sidecar.
func (m *Manager) Snapshot(ctx context.Context, idOrName string, req SnapshotRequest) (template.Template, error) {
	if m.cfg.Templates == nil {
		return template.Template{}, fmt.Errorf("%w: this sidecar makes no templates", ErrUnsupported)
	}
	if req.Name == "" {
		return template.Template{}, fmt.Errorf("%w: name (the template's) is required", ErrInvalid)
	}
	if err := template.ValidName(req.Name); err != nil {
		return template.Template{}, fieldError("name", err)
	}
	if p, ok := m.eng.(placer); ok && p.Places() {
		return template.Template{}, fmt.Errorf("%w: snapshot on a cluster (--engine swarm): the workspace's container is on another node's engine", ErrUnsupported)
	}
	w, c, err := m.agentFor(ctx, idOrName)
	if err != nil {
		return template.Template{}, err
	}
	// Under its lifecycle lock: not stopped, deleted or forked meanwhile.
	unlock, err := w.lock(ctx)
	if err != nil {
		return template.Template{}, err
	}
	defer unlock()
	w.mu.Lock()
	md := w.meta
	w.mu.Unlock()
	if len(md.SecretEnv) > 0 || len(md.Secrets) > 0 {
		return template.Template{}, fmt.Errorf("%w: workspace %s holds secrets or secret environment variables: its sessions' state may hold their values, and a template is readable by every user of this sidecar; save a workspace without them", ErrInvalid, md.Name)
	}
	if md.Repo != "" || len(md.Objects) > 0 || len(md.ObjectDirs) > 0 {
		return template.Template{}, fmt.Errorf("%w: workspace %s is made from a repository, whose history its own borrows (objects read from the sidecar's store, not copied into it): a template cannot carry it yet; fork the workspace instead (patina ws fork)", ErrInvalid, md.Name)
	}
	if md.ContainerID == "" {
		return template.Template{}, fmt.Errorf("%w: workspace %s has no container", ErrNotRunning, md.Name)
	}
	// The sessions' latest state is what the template keeps.
	if err := c.FlushSnapshots(ctx); err != nil {
		return template.Template{}, w.explain(err)
	}
	t, err := m.cfg.Templates.Snapshot(ctx, template.SnapshotSource{
		Name: req.Name, Workspace: md.Name, WorkspaceID: md.ID, ContainerID: md.ContainerID,
		Env: md.Env, Clear: []string{wire.TokenEnv}, MaxBytes: m.cfg.MaxSnapshot,
	})
	if err != nil {
		return template.Template{}, fmt.Errorf("snapshot workspace %s: %w", md.Name, err)
	}
	m.log.Info("workspace saved as a template", "workspace_id", md.ID, "template", t.Name)
	return t, nil
}
