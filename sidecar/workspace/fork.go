package workspace

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/patina-dev/patina/sidecar/engine"
	"github.com/patina-dev/patina/sidecar/secrets"
	"github.com/patina-dev/patina/worktree"
)

// Fork makes a new workspace from src: its container's filesystem outside
// the workspace's files (a `docker commit`: installed packages, files under
// /root and /etc...), its files with their uncommitted changes, its own
// repository and, for a repository workspace, a new branch patina/<name>
// at src's current commit (recorded first); each session with its history
// and, in a new shell, its last state (cwd, variables, functions, aliases,
// options). Processes running in src are not carried. src keeps running
// (its container is paused while it is committed) and is not changed; a
// stopped src is forked as it was when it stopped.
func (m *Manager) Fork(ctx context.Context, srcName string, req ForkRequest) (Info, error) {
	if req.Count > 1 {
		return Info{}, fmt.Errorf("%w: count %d: use Forks for several forks", ErrInvalid, req.Count)
	}
	out, err := m.Forks(ctx, srcName, req)
	if err != nil {
		return Info{}, err
	}
	return out[0], nil
}

// MaxForkCount bounds ForkRequest.Count.
const MaxForkCount = 16

// Forks makes req.Count forks of src at once (1 when 0), as Fork makes
// one: src's state is taken once and each fork gets a clone of it. With a
// name and a count of 2 or more, the forks are named <name>-1 ... <name>-N
// (generated names without one). All or none: if one fails, the forks
// made before it are deleted.
func (m *Manager) Forks(ctx context.Context, srcName string, req ForkRequest) ([]Info, error) {
	n := req.Count
	switch {
	case n == 0:
		n = 1
	case n < 0 || n > MaxForkCount:
		return nil, fmt.Errorf("%w: count must be between 1 and %d, got %d", ErrInvalid, MaxForkCount, req.Count)
	}
	src, err := m.ready(ctx, srcName)
	if err != nil {
		return nil, err
	}
	// Under src's lifecycle lock: it is not started, stopped, deleted or
	// merged while its state is copied.
	unlock, err := src.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	src.mu.Lock()
	md, repo, c := src.meta, src.repo, src.agent
	running := src.status == StatusRunning && c != nil
	src.mu.Unlock()
	if running {
		// The fork's sessions start from their snapshots: make them current.
		if err := c.FlushSnapshots(ctx); err != nil {
			return nil, src.explain(err)
		}
	}
	if p, ok := m.eng.(placer); ok && p.Places() {
		return nil, fmt.Errorf("%w: fork on a cluster (--engine swarm): the workspace's container and volumes are on another node's engine", ErrUnsupported)
	}
	if md.Format < formatAgent {
		return nil, fmt.Errorf("%w: workspace %s is of an older patina; start it once (which migrates it) before forking it", ErrInvalid, md.Name)
	}
	if md.Repo != "" && repo == nil {
		return nil, fmt.Errorf("%w: the repository of workspace %s cannot be opened", ErrInvalid, md.Name)
	}
	base := ""
	if repo != nil {
		if running {
			st, err := c.GitState(ctx)
			if err != nil {
				return nil, src.explain(err)
			}
			if st.Head != "" {
				if _, err := repo.Record(ctx, md.ID, worktree.RecordRequest{Head: st.Head, Source: agentSource{c}}); err != nil {
					return nil, err
				}
			}
		}
		wt, err := repo.Get(ctx, md.ID)
		if err != nil {
			return nil, err
		}
		base = wt.Head
		if base == "" {
			base = md.BaseCommit
		}
	}
	netw := policyInfo(md.policy())
	// Its secret environment comes along (its sessions' state holds it
	// anyway); its secrets only when asked.
	creq := CreateRequest{
		Name: req.Name, Repo: md.Repo, Base: base, Image: md.Image, Env: md.Env, SecretEnv: md.SecretEnv,
		MemoryMB: md.MemoryMB, CPUs: md.CPUs, PidsLimit: md.PidsLimit, Network: &netw, IdleStop: md.IdleStop,
	}
	var grants []secrets.Grant
	if req.KeepSecrets {
		grants = md.Secrets
		for _, g := range grants {
			creq.Secrets = append(creq.Secrets, g.Name)
		}
	}
	if err := m.validateCreate(&creq); err != nil {
		return nil, err
	}
	creq.DiskMB = md.DiskMB // a clone of the source's disk, or none as it has none
	target := ""
	if strings.HasPrefix(md.Base, "refs/heads/") {
		target = md.Base
	}
	plan := &forkPlan{from: md.ID, target: target, grants: grants, prepare: func(ctx context.Context, w *workspace, undo *[]func()) error {
		if md.DiskMB > 0 {
			return m.forkDisk(ctx, md, w, undo)
		}
		img := md.Image
		ref := "patina/fork:" + w.meta.ID
		switch err := m.eng.Commit(ctx, md.ContainerID, md.ID, ref); {
		case err == nil:
			img = ref
			w.meta.ForkImage = ref
			*undo = append(*undo, func() { _ = m.eng.RemoveImage(context.WithoutCancel(ctx), ref) })
		case errors.Is(err, engine.ErrNotFound) || md.ContainerID == "":
			// Its container was removed: nothing outside the volumes to carry.
			m.log.Warn("fork: the source's container is gone; the fork starts from its image", "workspace_id", md.ID)
		default:
			return err
		}
		w.meta.Image = img
		*undo = append(*undo, func() { _ = m.eng.RemoveVolumes(context.WithoutCancel(ctx), w.meta.ID) })
		return m.eng.CopyVolumes(ctx, engine.CopySpec{
			From: md.ID, To: w.meta.ID, FromFiles: md.Worktree, ToFiles: w.meta.Worktree, Image: md.Image,
		})
	}}
	var out []Info
	for i := 1; i <= n; i++ {
		one := creq
		if n > 1 && req.Name != "" {
			one.Name = fmt.Sprintf("%s-%d", req.Name, i)
		}
		ws, err := m.create(ctx, one, plan)
		if err != nil {
			for _, made := range out {
				if derr := m.Delete(context.WithoutCancel(ctx), made.ID, false); derr != nil {
					m.log.Warn("fork: delete a fork made before one failed", "workspace_id", made.ID, "err", derr)
				}
			}
			if n > 1 {
				return nil, fmt.Errorf("fork workspace %s (%d of %d; none kept): %w", md.Name, i, n, err)
			}
			return nil, fmt.Errorf("fork workspace %s: %w", md.Name, err)
		}
		m.log.Info("workspace forked", "from", md.ID, "workspace_id", ws.ID, "name", ws.Name)
		out = append(out, ws)
	}
	return out, nil
}

// forkDisk makes the fork's disk a clone of its source's (files, sessions'
// state, the container's writable layer: shared until either side writes,
// sparse files sparse), and gives the fork's container the source's image
// as it is now (its layer applies to that image).
func (m *Manager) forkDisk(ctx context.Context, src meta, w *workspace, undo *[]func()) error {
	imageID := src.ImageID
	if st, err := m.eng.Inspect(ctx, src.ContainerID); err == nil && st.Image != "" {
		imageID = st.Image
	}
	if _, err := m.cfg.Disks.Clone(ctx, src.ID, w.meta.ID); err != nil {
		return fmt.Errorf("clone the disk of workspace %s: %w", src.Name, err)
	}
	*undo = append(*undo, func() { _ = m.cfg.Disks.Remove(context.WithoutCancel(ctx), w.meta.ID) })
	w.meta.ImageID = imageID
	return nil
}
