package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/patina-dev/patina/sidecar/engine"
	"github.com/patina-dev/patina/worktree"
)

// Adopt finds the workspaces of a previous run (their records in the
// state directory) and reconnects to them in the background: each reports
// "adopting" until its container was inspected and its agent answered (or
// was started again). It returns at once; Adopted is closed when all are
// done. It also starts watching the engine's events.
func (m *Manager) Adopt() (adopted <-chan struct{}) {
	root := filepath.Join(m.cfg.StateDir, "workspaces")
	entries, err := os.ReadDir(root)
	if err != nil {
		m.log.Warn("read workspaces", "err", err)
	}
	var wss []*workspace
	for _, e := range entries {
		md, err := readRecord(filepath.Join(root, e.Name(), metaFile))
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				m.log.Warn("skip an unreadable workspace record", "dir", e.Name(), "err", err)
			}
			continue
		}
		if md.ID != e.Name() || worktree.ValidateName(md.Name) != nil {
			m.log.Warn("skip a workspace record that does not match its directory", "dir", e.Name())
			continue
		}
		w := newWorkspace(m, md)
		w.status = StatusAdopting
		m.register(w)
		wss = append(wss, w)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sem := make(chan struct{}, 4)
		var wg sync.WaitGroup
		for _, w := range wss {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				w.adopt(m.bg)
			}()
		}
		wg.Wait()
		m.adoptOrphans(m.bg)
		m.removeOrphanDisks(m.bg)
		m.stores.sweep(m.bg)
		m.log.Info("adoption done", "workspaces", len(wss))
	}()
	go m.eng.Watch(m.bg, m.onContainerEvent)
	go m.reapIdle(m.bg)
	if m.pool != nil {
		go m.runPool(done)
	}
	return done
}

// removeOrphanDisks removes this sidecar's disks whose workspace has no
// directory (a create or a delete cut short by a crash: create makes the
// directory before the disk, delete removes the disk before the
// directory).
func (m *Manager) removeOrphanDisks(ctx context.Context) {
	if m.cfg.Disks == nil {
		return
	}
	ids, err := m.cfg.Disks.Owned()
	if err != nil {
		m.log.Warn("list the workspaces' disks", "err", err)
		return
	}
	for _, id := range ids {
		if _, err := os.Stat(filepath.Join(m.cfg.StateDir, "workspaces", id)); !errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err := m.cfg.Disks.Remove(ctx, id); err != nil {
			m.log.Warn("remove the disk of a workspace that is gone", "workspace_id", id, "err", err)
			continue
		}
		m.log.Info("removed the disk of a workspace that is gone", "workspace_id", id)
	}
}

func readRecord(path string) (meta, error) {
	var md meta
	b, err := os.ReadFile(path)
	if err != nil {
		return md, err
	}
	if err := json.Unmarshal(b, &md); err != nil {
		return md, err
	}
	if md.Format == 0 {
		md.Format = formatLegacy
	}
	return md, nil
}

// adopt reconnects to one workspace of a previous run.
func (w *workspace) adopt(ctx context.Context) {
	m := w.m
	defer close(w.adopted)
	ctx, cancel := context.WithTimeout(ctx, adoptTimeout)
	defer cancel()
	w.mu.Lock()
	md := w.meta
	w.mu.Unlock()
	var why, notice string
	var repo *worktree.Repo
	if md.Repo != "" {
		r, err := m.repo(ctx, md.Repo)
		if err != nil {
			why = "its repository cannot be opened: " + err.Error()
		} else {
			repo = r
			notice = w.checkNote(ctx, r)
		}
	}
	status := StatusStopped
	legacy := md.Format < formatAgent
	if legacy {
		// A workspace of the design before the agent: its container mounts
		// the user's git directory writable. It must not run on: remove it
		// (its files stay); start migrates the workspace.
		if md.ContainerID != "" {
			if err := m.eng.Remove(ctx, md.ContainerID); err != nil {
				m.log.Warn("remove a legacy container", "workspace_id", md.ID, "err", err)
			}
			w.mu.Lock()
			w.meta.ContainerID = "" // its events are not the workspace's any more
			w.mu.Unlock()
		}
		if why == "" {
			why = "patina was upgraded: start the workspace to move it to the new format (its files and commits are kept; its shells start anew)"
		}
	} else {
		st, err := m.eng.Inspect(ctx, md.ContainerID)
		switch {
		case errors.Is(err, engine.ErrNotFound):
			if !md.Stopped && why == "" {
				why = "its container was removed outside patina"
			}
		case err != nil:
			if why == "" {
				why = "its container cannot be inspected: " + err.Error()
			}
		case st.Running && why == "":
			status = StatusRunning
		case st.Status == "paused" && md.IdlePaused && md.Stopped:
			// Paused by idle stop: it stays so until its next use.
			if why == "" {
				why = fmt.Sprintf("it was paused for being idle (idle_stop %s), its processes kept; the next exec, attach or port connection resumes it at once", w.idleStop())
			}
		case st.Status == "paused" && why == "":
			// A sidecar killed while it saved the workspace (ws snapshot)
			// left it paused: Start unpauses it.
			if err := m.eng.Start(ctx, md.ContainerID); err != nil {
				why = "its container is paused and could not be unpaused: " + err.Error()
			} else {
				status = StatusRunning
			}
		default:
			if !md.Stopped && why == "" {
				why = exitedWhy(st)
			}
		}
		if md.IdlePaused && st.Status != "paused" {
			// Killed while it resumed or stopped it (or the host restarted):
			// not paused any more.
			w.mu.Lock()
			w.meta.IdlePaused = false
			if status == StatusRunning {
				w.meta.Stopped, w.meta.IdleStopped = false, false
			}
			w.mu.Unlock()
		}
	}
	if !legacy && len(md.ObjectDirs) > 0 {
		if status == StatusRunning {
			m.log.Warn("the workspace's container still mounts its repository's object directory; stop and start it to move it to object stores", "workspace_id", md.ID)
			if notice == "" {
				notice = movedNotice
			}
		} else {
			m.log.Info("the workspace moves to object stores at its next start", "workspace_id", md.ID)
		}
	}
	if status == StatusRunning {
		// Its container may be on the shared network of an older patina:
		// it moves to this sidecar's, under its policy.
		w.mu.Lock()
		w.notice = notice
		w.mu.Unlock()
		if err := w.applyNetwork(ctx); err != nil {
			m.log.Warn("adopt: apply the workspace's network policy", "workspace_id", md.ID, "err", err)
		}
		w.mu.Lock()
		notice = w.notice
		w.mu.Unlock()
	}
	w.mu.Lock()
	w.repo = repo
	w.why, w.notice = why, notice
	w.status = status
	if status == StatusRunning {
		w.agent = w.newAgentClient()
	}
	w.log = newEventLog(w.sink(), m.log, m.cfg.Redactor.Redact)
	c := w.agent
	w.mu.Unlock()
	if c != nil {
		h, err := c.Connect(ctx)
		w.mu.Lock()
		if err == nil {
			w.ag.hello = h
		} else {
			w.ag.err = err.Error()
		}
		w.mu.Unlock()
		if err == nil {
			w.watchAgent(c)
		} else {
			_ = w.explain(err)
			m.log.Warn("adopt: the workspace's agent does not answer", "workspace_id", md.ID, "err", err)
		}
	}
	w.restoreForwards(ctx)
	m.log.Info("workspace adopted", "workspace_id", md.ID, "name", md.Name, "status", w.view().Status)
}

// checkNote compares the workspace's state note with the sidecar's record:
// a note is outside input (it travels with the repository), so a note that
// disagrees is reported, never obeyed.
func (w *workspace) checkNote(ctx context.Context, r *worktree.Repo) string {
	w.mu.Lock()
	md := w.meta
	w.mu.Unlock()
	wt, err := r.Get(ctx, md.ID)
	if err != nil {
		return fmt.Sprintf("its state note in %s cannot be read (%v); the sidecar's record is used", md.Repo, err)
	}
	var note noteMeta
	_ = json.Unmarshal(wt.Meta, &note)
	var diffs []string
	if wt.Name != md.Name {
		diffs = append(diffs, fmt.Sprintf("name %q", wt.Name))
	}
	if wt.BaseCommit != md.BaseCommit && md.BaseCommit != "" {
		diffs = append(diffs, "base commit "+wt.BaseCommit)
	}
	if md.Format >= formatAgent && note.ID != "" && note.ID != md.ID {
		diffs = append(diffs, "id "+note.ID)
	}
	if md.Format >= formatAgent && note.Image != "" && note.Image != md.Image {
		diffs = append(diffs, "image "+note.Image)
	}
	if len(diffs) == 0 {
		return ""
	}
	m := fmt.Sprintf("its state note disagrees with the sidecar's record (%v); the record is used", diffs)
	w.m.log.Warn("state note disagrees with the record", "workspace_id", md.ID, "differences", diffs)
	return m
}

// adoptOrphans looks at containers of this state directory that have no
// record: they are left alone and logged (a record is the only source of
// a workspace's paths and settings; a note is not one).
func (m *Manager) adoptOrphans(ctx context.Context) {
	owned, err := m.eng.List(ctx)
	if err != nil {
		m.log.Warn("list containers", "err", err)
		return
	}
	for _, c := range owned {
		if _, err := m.lookup(c.WorkspaceID); err == nil {
			continue
		}
		m.log.Warn("a container labelled as this sidecar's has no workspace record; leaving it alone (remove it with docker rm -f)", "container", shortID(c.ID), "workspace_id", c.WorkspaceID)
	}
}

// onContainerEvent marks a workspace stopped when its container dies or
// is removed without the sidecar asking. Events of another container (one
// the workspace had before, one a migration removed) do not count.
func (m *Manager) onContainerEvent(id, containerID, action string) {
	w, err := m.lookup(id)
	if err != nil {
		return
	}
	w.mu.Lock()
	busy := w.meta.Stopped || w.deleted || w.status == StatusAdopting || w.meta.ContainerID != containerID
	w.mu.Unlock()
	if !busy {
		w.containerEvent(action)
	}
}

// migrate moves a legacy workspace (sessions driven from the host, the
// user's git directory mounted) to the agent format, under the lifecycle
// lock: the repository side (notes to an anchor, the git worktree's admin
// directory removed), a new agent token, a new container (start makes it);
// the files stay where they are and the agent's git init keeps them.
func (w *workspace) migrate(ctx context.Context) error {
	m := w.m
	w.mu.Lock()
	md, repo := w.meta, w.repo
	w.mu.Unlock()
	if md.Repo != "" {
		if repo == nil {
			return fmt.Errorf("its repository %s cannot be opened", md.Repo)
		}
		wt, err := repo.Migrate(ctx, md.ID)
		if err != nil {
			return fmt.Errorf("migrate its repository side: %w", err)
		}
		md.Branch = wt.Branch
		md.ObjectDirs = nil // start gives it object stores
		if wt.LegacyPath != "" {
			md.Worktree = wt.LegacyPath
		}
	}
	if md.ContainerID != "" {
		_ = m.eng.Remove(ctx, md.ContainerID)
	}
	// The old sessions lived in a directory the old container could write:
	// not read, removed.
	_ = os.RemoveAll(filepath.Join(w.dir, "sessions"))
	md.Format = formatAgent
	md.ContainerID = ""
	md.AgentToken = randomHex(32)
	md.GitCommonDir, md.GitDir = "", ""
	w.mu.Lock()
	w.meta = md
	w.notice = "migrated to the agent format: its shells started anew (the history before is not kept)"
	w.mu.Unlock()
	m.log.Info("workspace migrated", "workspace_id", md.ID)
	return w.save(ctx)
}
