package sidecar

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/sidecar/client"
	"github.com/patina-dev/patina/sidecar/container"
	"github.com/patina-dev/patina/worktree"
)

func (s *Service) handleListWorkspaces(w http.ResponseWriter, r *http.Request) {
	wss := s.list()
	out := make([]client.Workspace, 0, len(wss))
	for _, ws := range wss {
		out = append(out, ws.snapshot())
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Service) handleGetWorkspace(w http.ResponseWriter, r *http.Request) {
	ws, err := s.lookup(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ws.snapshot())
}

func (s *Service) handleStopWorkspace(w http.ResponseWriter, r *http.Request) {
	s.workspaceAction(w, r, (*workspace).stop)
}

func (s *Service) handleStartWorkspace(w http.ResponseWriter, r *http.Request) {
	s.workspaceAction(w, r, (*workspace).start)
}

// workspaceAction runs a lifecycle action on {id} and answers with the
// workspace.
func (s *Service) workspaceAction(w http.ResponseWriter, r *http.Request, act func(*workspace, context.Context) error) {
	ws, err := s.lookup(r.PathValue("id"))
	if err == nil {
		err = act(ws, r.Context())
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ws.snapshot())
}

func (s *Service) handleDeleteWorkspace(w http.ResponseWriter, r *http.Request) {
	keep := false
	switch v := r.URL.Query().Get("keep_branch"); v {
	case "", "0", "false":
	case "1", "true":
		keep = true
	default:
		writeError(w, fmt.Errorf("%w: keep_branch must be 1 or 0, got %q", errInvalid, v))
		return
	}
	ws, err := s.lookup(r.PathValue("id"))
	if err == nil {
		err = s.deleteWorkspace(r.Context(), ws, keep)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// beginLifecycle takes the lifecycle lock of a workspace that is not
// deleted, and returns with w.mu held too.
func (w *workspace) beginLifecycle() (unlock func(), err error) {
	w.life.Lock()
	w.mu.Lock()
	if w.deleted {
		w.mu.Unlock()
		w.life.Unlock()
		return nil, fmt.Errorf("%w: workspace was deleted", errNotFound)
	}
	return w.life.Unlock, nil
}

// stop stops the container; the worktree, notes and session history stay.
// Sessions end with the container; start revives them.
func (w *workspace) stop(ctx context.Context) error {
	unlock, err := w.beginLifecycle()
	if err != nil {
		return err
	}
	defer unlock()
	w.meta.Stopped = true
	id := w.meta.ContainerID
	w.mu.Unlock()
	err = container.Stop(ctx, w.svc.docker, id, w.svc.cfg.StopTimeout)
	if err != nil && !errors.Is(err, container.ErrNotFound) {
		return fmt.Errorf("stop workspace: %w", err)
	}
	w.mu.Lock()
	w.status = client.StatusStopped
	w.why = ""
	w.mu.Unlock()
	w.log.add(worktree.Event{Kind: "stopped"})
	return w.save(ctx)
}

// start starts the container again, or recreates it when it is gone, and
// revives the sessions with their state.
func (w *workspace) start(ctx context.Context) error {
	unlock, err := w.beginLifecycle()
	if err != nil {
		return err
	}
	defer unlock()
	id := w.meta.ContainerID
	w.mu.Unlock()
	svc := w.svc
	if w.repo != nil {
		if wt, err := w.repo.Get(ctx, w.meta.ID); err == nil && wt.Missing {
			if _, err := w.repo.Repair(ctx, w.meta.ID); err != nil {
				return fmt.Errorf("start workspace: its worktree vanished and could not be repaired: %w", err)
			}
		}
	}
	st, err := container.Inspect(ctx, svc.docker, id)
	recreated := false
	switch {
	case errors.Is(err, container.ErrNotFound):
		cid, err := container.Create(ctx, svc.docker, w.containerSpec())
		if err != nil {
			return fmt.Errorf("start workspace: recreate its container: %w", err)
		}
		w.mu.Lock()
		w.meta.ContainerID = cid
		w.mu.Unlock()
		w.prepareContainer(ctx)
		recreated = true
	case err != nil:
		return fmt.Errorf("start workspace: %w", err)
	case !st.Running:
		if err := container.Start(ctx, svc.docker, id); err != nil {
			return fmt.Errorf("start workspace: %w", err)
		}
	}
	w.mu.Lock()
	old := w.sessions
	w.mu.Unlock()
	m := old
	if recreated || old == nil {
		if old != nil {
			_ = old.Close()
		}
		m, err = svc.openSessions(ctx, w)
		if err != nil {
			return fmt.Errorf("start workspace: sessions: %w", err)
		}
	}
	// Every session died with the container: give each a new shell with the
	// state of its last snapshot.
	for _, inf := range m.List() {
		if inf.State != session.StateEnded {
			continue
		}
		if _, err := m.Revive(ctx, inf.ID); err != nil {
			svc.log.Warn("revive session", "workspace_id", w.meta.ID, "session_id", inf.ID, "err", err)
		}
	}
	w.mu.Lock()
	w.sessions = m
	w.status = client.StatusRunning
	w.why = ""
	w.meta.Stopped = false
	w.mu.Unlock()
	w.log.add(worktree.Event{Kind: "started"})
	return w.save(ctx)
}

// deleteWorkspace removes the container, the sessions, the worktree and
// (unless keep) the branch and notes.
func (s *Service) deleteWorkspace(ctx context.Context, w *workspace, keep bool) error {
	unlock, err := w.beginLifecycle()
	if err != nil {
		return err
	}
	defer unlock()
	w.deleted = true
	m, id, repo, meta := w.sessions, w.meta.ContainerID, w.repo, w.meta
	w.mu.Unlock()
	ctx = context.WithoutCancel(ctx) // half a delete helps nobody
	if m != nil {
		_ = m.Close()
	}
	if err := container.Remove(ctx, s.docker, id); err != nil {
		s.log.Warn("remove container", "workspace_id", meta.ID, "err", err)
	}
	if repo != nil {
		w.log.close()
		if err := repo.Delete(ctx, meta.ID, worktree.DeleteRequest{KeepBranch: keep}); err != nil && !errors.Is(err, worktree.ErrNotFound) {
			w.mu.Lock()
			w.deleted = false
			w.mu.Unlock()
			return fmt.Errorf("delete workspace: %w", err)
		}
	} else {
		w.log.close()
	}
	if err := os.RemoveAll(w.dir); err != nil {
		s.log.Warn("remove workspace directory", "workspace_id", meta.ID, "err", err)
	}
	s.mu.Lock()
	delete(s.workspaces, meta.ID)
	if s.names[meta.Name] == meta.ID {
		delete(s.names, meta.Name)
	}
	s.mu.Unlock()
	s.log.Info("workspace deleted", "workspace_id", meta.ID, "keep_branch", keep)
	return nil
}
