package workspace

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/worktree"
)

// MaxIdleStop bounds a workspace's idle_stop.
const MaxIdleStop = 30 * 24 * time.Hour

// What counts as activity, for idle stop: any API call that names the
// workspace and reaches it (exec, sessions, output, files, git, ports,
// lifecycle: everything that goes through ready), a command running in any
// of its sessions, and a connection open through one of its forwarded
// ports. Listing or showing workspaces does not count (a dashboard that
// polls would keep every workspace up).

// touch records activity now.
func (w *workspace) touch() { w.lastActive.Store(time.Now().UnixNano()) }

// idleFor is how long the workspace has had no recorded activity.
func (w *workspace) idleFor(now time.Time) time.Duration {
	return now.Sub(time.Unix(0, w.lastActive.Load()))
}

// idleStop is the workspace's idle-stop setting: its own, else the
// server's; 0: never.
func (w *workspace) idleStop() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.idleStopLocked()
}

func (w *workspace) idleStopLocked() time.Duration {
	s := w.meta.IdleStop
	if s == "" {
		return w.m.cfg.IdleStop
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0
	}
	return d
}

// parseIdleStop checks a request's idle_stop: "" (the server's default),
// "0" (never) or a duration from 1s to MaxIdleStop.
func parseIdleStop(s string) error {
	if s == "" || s == "0" {
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < time.Second || d > MaxIdleStop {
		return fmt.Errorf("%w: idle_stop must be a duration from 1s to %s (e.g. \"15m\"), \"0\" for never, or empty for the server's default; got %q", ErrInvalid, MaxIdleStop, s)
	}
	return nil
}

// idleCheckEvery is how often the reaper looks at workspaces.
func (m *Manager) idleCheckEvery() time.Duration {
	if m.cfg.IdleCheck > 0 {
		return m.cfg.IdleCheck
	}
	return defaultIdleCheck
}

// idleReapers bounds the idle stops under way at once. Each workspace's
// runs on its own: one slow to pause or stop (an engine call waiting on
// its container, an agent slow to answer) holds one of them, and the
// others are stopped meanwhile.
const idleReapers = 8

// reapIdle stops, every idleCheckEvery, the running workspaces idle for
// longer than their idle_stop, until ctx ends.
func (m *Manager) reapIdle(ctx context.Context) {
	t := time.NewTicker(m.idleCheckEvery())
	defer t.Stop()
	slots := make(chan struct{}, idleReapers)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, w := range m.all() {
			// A pooled one waits started: that is its point. One whose
			// idle stop is under way is left to it.
			if w.isPooled() || !w.reaping.CompareAndSwap(false, true) {
				continue
			}
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				w.reaping.Store(false)
				return
			}
			go func() {
				defer func() {
					<-slots
					w.reaping.Store(false)
				}()
				w.maybeIdleStop(ctx)
			}()
		}
	}
}

// pauser is an engine that freezes a container and thaws it (Docker's
// pause: the cgroup freezer). Idle stop's first stage uses it where the
// engine has it; elsewhere (Swarm) idle stop stops the container at once.
type pauser interface {
	Pause(ctx context.Context, id string) error
	Unpause(ctx context.Context, id string) error
}

// Idle stop comes in two stages where the engine can pause containers.
// After idle_stop without activity the workspace is paused: its processes
// (shells, servers, background jobs) frozen with their memory, taking no
// CPU; its next use thaws it in milliseconds, everything as it was. After
// as long again, it is stopped: its container ends and its memory is
// freed; its next use starts it again, each session a new shell with the
// state it had (seconds). Either way it shows as stopped (idle).

// maybeIdleStop pauses the workspace if it has been idle long enough (or
// stops it, where the engine cannot pause), and stops a paused one idle
// for twice as long: no recorded activity, no open port connection, no
// running command and no terminal (asked of its agent; either counts as
// activity now).
func (w *workspace) maybeIdleStop(ctx context.Context) {
	limit := w.idleStop()
	if w.idlePaused() {
		// Its idle stop turned off since (a sidecar restarted with
		// another --idle-stop): stopped now, not paused for ever.
		w.maybeStopPaused(ctx, 2*max(limit, 0))
		return
	}
	if limit <= 0 {
		return
	}
	if w.runningErr() != nil || w.idleFor(time.Now()) < limit {
		return
	}
	if w.portConns() > 0 {
		w.touch()
		return
	}
	c, err := w.client()
	if err != nil {
		return
	}
	qctx, cancel := context.WithTimeout(ctx, agentQueryTimeout)
	infos, err := c.Sessions(qctx)
	cancel()
	if err != nil {
		return // an agent that does not answer is not known to be idle
	}
	for _, inf := range infos {
		if inf.State == session.StateRunning || inf.Terminal {
			w.touch()
			return
		}
	}
	if !w.tryLife() {
		return
	}
	defer func() { <-w.life }()
	if w.idleFor(time.Now()) < limit || w.runningErr() != nil {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, lifecycleTimeout)
	defer cancel()
	idle := w.idleFor(time.Now()).Round(time.Second)
	if p, ok := w.m.eng.(pauser); ok {
		why := fmt.Sprintf("it was idle for %s (idle_stop %s): paused, its processes kept; the next exec, attach or port connection resumes it at once (after %s idle it is stopped)", idle, limit, 2*limit)
		err := w.pauseIdle(sctx, p, why)
		if err == nil {
			w.logEvent(worktree.Event{Kind: "stopped", Message: "idle for " + idle.String() + ": paused"})
			w.m.log.Info("workspace paused: idle", "workspace_id", w.id(), "idle", idle)
			return
		}
		w.m.log.Warn("idle stop: pause; stopping it instead", "workspace_id", w.id(), "err", err)
		cancel()
		sctx, cancel = context.WithTimeout(ctx, lifecycleTimeout) // the pause may have spent the first
		defer cancel()
	}
	w.stopIdle(sctx, idle, fmt.Sprintf("it was idle for %s (idle_stop %s); the next exec, attach or port connection starts it again", idle, limit))
}

// tryLife takes the lifecycle lock only if it is free (a workspace being
// changed is not idle); the caller lets it go with <-w.life.
func (w *workspace) tryLife() bool {
	select {
	case w.life <- struct{}{}:
		return true
	default:
		return false
	}
}

// stopIdle stops the workspace for having been idle that long, saying why.
func (w *workspace) stopIdle(ctx context.Context, idle time.Duration, why string) {
	if err := w.stopWhy(ctx, why); err != nil {
		w.m.log.Warn("idle stop", "workspace_id", w.id(), "err", err)
		return
	}
	w.logEvent(worktree.Event{Kind: "stopped", Message: "idle for " + idle.String()})
	w.m.log.Info("workspace stopped: idle", "workspace_id", w.id(), "idle", idle)
}

// idlePaused reports whether idle stop paused the workspace.
func (w *workspace) idlePaused() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.meta.IdlePaused && w.meta.Stopped
}

// pauseIdle is idle stop's first stage: the session list kept for the
// API, the agent let go (it cannot answer while frozen), the container
// paused; the workspace shows as stopped (idle), saying why.
func (w *workspace) pauseIdle(ctx context.Context, p pauser, why string) error {
	w.mu.Lock()
	c := w.agent
	w.mu.Unlock()
	if c != nil {
		w.saveCache(ctx, c)
	}
	w.closeAgent()
	if err := p.Pause(ctx, w.containerID()); err != nil {
		return err
	}
	w.mu.Lock()
	w.meta.Stopped = true
	w.meta.IdleStopped = true
	w.meta.IdlePaused = true
	w.status = StatusStopped
	w.why = why
	w.mu.Unlock()
	return w.save(ctx)
}

// maybeStopPaused stops a workspace idle stop paused, once it has been
// idle for after: its memory is freed.
func (w *workspace) maybeStopPaused(ctx context.Context, after time.Duration) {
	if w.idleFor(time.Now()) < after || !w.tryLife() {
		return
	}
	defer func() { <-w.life }()
	if !w.idlePaused() || w.idleFor(time.Now()) < after {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, lifecycleTimeout)
	defer cancel()
	idle := w.idleFor(time.Now()).Round(time.Second)
	w.stopIdle(sctx, idle, fmt.Sprintf("it was idle for %s (idle_stop %s: paused, then stopped); the next exec, attach or port connection starts it again", idle, after/2))
}

// portConns counts the connections open through the workspace's forwards.
func (w *workspace) portConns() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, f := range w.fwd {
		n += int(f.conns.Load())
	}
	return n
}

// resumeIfIdle starts a workspace that idle stop stopped; true if it did.
// A workspace stopped by request, or whose container died, is left as it
// is (its caller gets ErrStopped, saying why).
func (w *workspace) resumeIfIdle(ctx context.Context) (bool, error) {
	if !errors.Is(w.runningErr(), ErrStopped) {
		return false, nil
	}
	w.mu.Lock()
	idle := w.meta.IdleStopped && w.meta.Stopped
	w.mu.Unlock()
	if !idle {
		return false, nil
	}
	resumed := false
	err := w.changeLocked(ctx, func(ctx context.Context) error {
		if w.runningErr() == nil { // another caller resumed it meanwhile
			return nil
		}
		if err := w.start(ctx); err != nil {
			return fmt.Errorf("resume workspace %s after its idle stop: %w", w.name(), err)
		}
		resumed = true
		w.mu.Lock()
		w.meta.IdleStopped = false
		w.notice = "resumed at " + time.Now().UTC().Format(time.RFC3339) + " after an idle stop"
		w.mu.Unlock()
		if err := w.save(ctx); err != nil {
			w.m.log.Warn("resume: save", "workspace_id", w.id(), "err", err)
		}
		w.touch()
		w.m.log.Info("workspace resumed after an idle stop", "workspace_id", w.id())
		return nil
	})
	return resumed, err
}
