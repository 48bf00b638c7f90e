package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/patina-dev/patina/sidecar/agent"
	"github.com/patina-dev/patina/sidecar/agent/wire"
	"github.com/patina-dev/patina/sidecar/engine"
	"github.com/patina-dev/patina/worktree"
)

// Lifecycle calls bound their Docker work: a workspace whose engine hangs
// costs its own caller, never a lock held forever.
const lifecycleTimeout = 2 * time.Minute

// lifecycle runs change on a workspace under its lifecycle lock, with a
// context that survives the caller's leaving (half a change helps nobody)
// but not lifecycleTimeout.
func (m *Manager) lifecycle(ctx context.Context, idOrName string, change func(*workspace, context.Context) error) (*workspace, error) {
	w, err := m.ready(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	return w, w.changeLocked(ctx, func(ctx context.Context) error { return change(w, ctx) })
}

// changeLocked runs change under the workspace's lifecycle lock (waited
// for as long as ctx allows), with a context that survives the caller's
// leaving but not lifecycleTimeout.
func (w *workspace) changeLocked(ctx context.Context, change func(context.Context) error) error {
	unlock, err := w.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lifecycleTimeout)
	defer cancel()
	return change(ctx)
}

// Stop stops the workspace's container; its files, repository, notes and
// sessions' state stay (Start revives them). The sessions' history stays
// readable while it is stopped.
func (m *Manager) Stop(ctx context.Context, idOrName string) (Info, error) {
	w, err := m.lifecycle(ctx, idOrName, (*workspace).stop)
	if err != nil {
		return Info{}, err
	}
	return w.view(), nil
}

// stop does Stop's work under the lifecycle lock.
func (w *workspace) stop(ctx context.Context) error { return w.stopWhy(ctx, "") }

// stopWhy stops the workspace; a non-empty idleWhy marks it stopped for
// being idle, saying why, in the same step that shows it stopped, so that
// no caller ever sees it stopped without knowing that its next use resumes
// it.
func (w *workspace) stopWhy(ctx context.Context, idleWhy string) error {
	m := w.m
	w.mu.Lock()
	c, status, paused := w.agent, w.status, w.meta.IdlePaused
	w.meta.Stopped = true
	w.meta.IdleStopped = false // set again, with the status, once stopped
	w.meta.IdlePaused = false
	w.mu.Unlock()
	if c != nil && status == StatusRunning {
		w.saveCache(ctx, c)
	}
	w.closeAgent()
	if p, ok := m.eng.(pauser); ok && paused {
		// Paused by idle stop: thawed, so that its processes take the stop
		// signal and end as in any stop.
		if err := p.Unpause(ctx, w.containerID()); err != nil && !errors.Is(err, engine.ErrNotFound) {
			m.log.Warn("stop: unpause the idle workspace's container", "workspace_id", w.id(), "err", err)
		}
	}
	if err := m.eng.Stop(ctx, w.containerID(), m.cfg.StopTimeout); err != nil && !errors.Is(err, engine.ErrNotFound) {
		return fmt.Errorf("stop workspace: %w", err)
	}
	m.cfg.Network.Forget(w.id())
	w.mu.Lock()
	w.status = StatusStopped
	w.why = idleWhy
	w.meta.IdleStopped = idleWhy != ""
	w.mu.Unlock()
	w.logEvent(worktree.Event{Kind: "stopped"})
	return w.save(ctx)
}

// closeAgent drops the connection to the agent (the container is going).
func (w *workspace) closeAgent() {
	w.mu.Lock()
	c, watch := w.agent, w.watch
	w.agent, w.watch = nil, nil
	w.mu.Unlock()
	if watch != nil {
		watch()
	}
	if c != nil {
		c.Close()
	}
}

// Start starts a stopped workspace: its container again (recreated if it
// was removed: its volumes keep the sessions and a scratch workspace's
// files), a legacy workspace migrated first; its agent; each session a new
// shell with the state it had.
func (m *Manager) Start(ctx context.Context, idOrName string) (Info, error) {
	w, err := m.lifecycle(ctx, idOrName, (*workspace).start)
	if err != nil {
		return Info{}, fmt.Errorf("start workspace: %w", err)
	}
	return w.view(), nil
}

// start does Start's work under the lifecycle lock.
func (w *workspace) start(ctx context.Context) error {
	m := w.m
	ph := newPhases()
	w.mu.Lock()
	legacy := w.meta.Format < formatAgent
	w.mu.Unlock()
	if legacy {
		if err := w.migrate(ctx); err != nil {
			return err
		}
	}
	w.mu.Lock()
	md, repo := w.meta, w.repo
	w.mu.Unlock()
	if repo == nil && md.Repo != "" {
		return fmt.Errorf("its repository %s cannot be opened: %s", md.Repo, w.why)
	}
	// Paused by idle stop: thawed, its agent, shells and processes as they
	// were (below, the agent is reached again without starting one).
	thawed := false
	if p, ok := m.eng.(pauser); ok && md.IdlePaused {
		if err := p.Unpause(ctx, md.ContainerID); err != nil {
			m.log.Warn("resume: unpause; starting it anew", "workspace_id", md.ID, "err", err)
		} else {
			thawed = true
		}
		ph.mark("unpause")
	}
	if md.Worktree != "" {
		if err := m.makeWorktreeDir(md.Worktree); err != nil {
			return err
		}
	}
	if repo != nil && !md.Shipped {
		if err := w.readyObjects(ctx, legacy); err != nil {
			return err
		}
		w.mu.Lock()
		md = w.meta
		w.mu.Unlock()
	}
	if err := m.images.Ensure(ctx, md.Image); err != nil {
		return err
	}
	ph.mark("image")
	if md.DiskMB > 0 {
		if err := w.mountDisk(ctx); err != nil {
			return err
		}
		ph.mark("disk")
	}
	st, err := m.eng.Inspect(ctx, md.ContainerID)
	switch {
	case errors.Is(err, engine.ErrNotFound) || md.ContainerID == "":
		cid, err := m.eng.Create(ctx, w.spec())
		if err != nil {
			return fmt.Errorf("recreate its container: %w", err)
		}
		w.mu.Lock()
		w.meta.ContainerID, w.meta.AgentProtocol = cid, wire.ProtocolVersion
		w.mu.Unlock()
	case err != nil:
		return err
	case !st.Running:
		if md.DiskMB > 0 {
			if err := m.eng.BindDisk(ctx, md.ContainerID, w.diskPath()); err != nil {
				return fmt.Errorf("put its container's layer on its disk: %w", err)
			}
		}
		if err := m.eng.Start(ctx, md.ContainerID); err != nil {
			return err
		}
	}
	ph.mark("container")
	if err := w.applyNetwork(ctx); err != nil {
		return err
	}
	ph.mark("network")
	w.closeAgent()
	w.mu.Lock()
	w.agent = w.newAgentClient()
	w.mu.Unlock()
	if !thawed || !w.reconnectAgent(ctx) {
		if err := w.startAgent(ctx); err != nil {
			return err
		}
	}
	ph.mark("agent")
	c, _ := w.agentClient()
	if w.repo != nil {
		if err := w.gitInit(ctx, legacy); err != nil {
			return err
		}
		ph.mark("git")
	}
	// Every session's shell ended with the container: give each a new one
	// with the state of its last snapshot.
	if _, err := c.Revive(ctx, ""); err != nil {
		m.log.Warn("revive sessions", "workspace_id", md.ID, "err", err)
	}
	ph.mark("sessions")
	defer func() { m.log.Debug("workspace start timings", append([]any{"workspace_id", md.ID}, ph.log()...)...) }()
	w.mu.Lock()
	w.status = StatusRunning
	w.why = ""
	w.meta.Stopped = false
	// Cleared only now: a resume that failed half-way leaves it to idle
	// stop's second stage (the container may run thawed meanwhile).
	w.meta.IdlePaused = false
	if w.log == nil {
		w.log = newEventLog(w.sink(), m.log, m.cfg.Redactor.Redact)
	}
	w.mu.Unlock()
	w.logEvent(worktree.Event{Kind: "started"})
	return w.save(ctx)
}

// mountDisk mounts the workspace's disk if it is not (the host restarted).
func (w *workspace) mountDisk(ctx context.Context) error {
	if w.m.cfg.Disks == nil {
		return fmt.Errorf("its disk cannot be mounted: %v", w.m.diskSupport(ctx))
	}
	if _, err := w.m.cfg.Disks.Mount(ctx, w.id()); err != nil {
		return fmt.Errorf("mount its disk: %w", err)
	}
	return nil
}

func (w *workspace) agentClient() (*agent.Client, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.agent == nil {
		return nil, w.stoppedErrLocked()
	}
	return w.agent, nil
}

// logEvent adds an event to the workspace's log, if it has one.
func (w *workspace) logEvent(ev worktree.Event) {
	w.mu.Lock()
	l := w.log
	w.mu.Unlock()
	if l != nil {
		l.add(ev)
	}
}

// Delete removes the workspace: its container, its volumes (sessions,
// scratch files), its worktree directory, its state note and (unless
// keepBranch) its branch and log note.
func (m *Manager) Delete(ctx context.Context, idOrName string, keepBranch bool) error {
	_, err := m.lifecycle(ctx, idOrName, func(w *workspace, ctx context.Context) error { return w.delete(ctx, keepBranch) })
	return err
}

// delete does Delete's work under the lifecycle lock.
func (w *workspace) delete(ctx context.Context, keepBranch bool) error {
	m := w.m
	w.mu.Lock()
	w.deleted = true
	md, repo, l := w.meta, w.repo, w.log
	w.mu.Unlock()
	w.closeForwards()
	w.closeAgent()
	m.cfg.Network.Forget(md.ID)
	if err := m.eng.Remove(ctx, md.ContainerID); err != nil {
		m.log.Warn("remove container", "workspace_id", md.ID, "err", err)
	}
	if err := m.eng.RemoveVolumes(ctx, md.ID); err != nil {
		m.log.Warn("remove volumes", "workspace_id", md.ID, "err", err)
	}
	if md.MovedImage != "" {
		if err := m.eng.RemoveImage(ctx, md.MovedImage); err != nil {
			m.log.Warn("remove the image of its container before its move to object stores", "workspace_id", md.ID, "image", md.MovedImage, "err", err)
		}
	}
	if md.ForkImage != "" {
		// A fork of this fork still uses it: then it stays, as Docker says.
		if err := m.eng.RemoveImage(ctx, md.ForkImage); err != nil {
			m.log.Warn("remove the fork's image", "workspace_id", md.ID, "image", md.ForkImage, "err", err)
		}
	}
	if l != nil {
		l.close()
	}
	if repo != nil {
		if err := repo.Delete(ctx, md.ID, worktree.DeleteRequest{KeepBranch: keepBranch}); err != nil && !errors.Is(err, worktree.ErrNotFound) {
			w.mu.Lock()
			w.deleted = false
			w.mu.Unlock()
			return fmt.Errorf("delete workspace: %w", err)
		}
	}
	if md.Worktree != "" {
		m.removeWorktreeDir(md.Worktree)
	}
	if md.DiskMB > 0 && m.cfg.Disks != nil {
		if err := m.cfg.Disks.Remove(ctx, md.ID); err != nil {
			m.log.Warn("remove the workspace's disk", "workspace_id", md.ID, "err", err)
		}
	}
	if err := os.RemoveAll(w.dir); err != nil {
		m.log.Warn("remove the workspace's directory", "workspace_id", md.ID, "err", err)
	}
	m.unregister(w)
	m.stores.collect(ctx, md.Objects)
	m.log.Info("workspace deleted", "workspace_id", md.ID, "keep_branch", keepBranch)
	return nil
}
