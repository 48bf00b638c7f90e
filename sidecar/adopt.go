package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"

	"github.com/patina-dev/patina/sidecar/client"
	"github.com/patina-dev/patina/sidecar/container"
)

// adopt finds the workspaces of a previous run: every workspace.json in the
// state directory, and containers labelled as this state directory's whose
// record is gone but whose repository's state note still describes them.
// Running containers get their sessions reattached (a command that was
// running finishes normally); dead ones are reported stopped with why.
func (s *Service) adopt(ctx context.Context) {
	root := filepath.Join(s.cfg.StateDir, "workspaces")
	entries, err := os.ReadDir(root)
	if err != nil {
		s.log.Warn("read workspaces", "err", err)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(root, e.Name(), metaFile))
		if err != nil {
			continue
		}
		var meta wsMeta
		if err := json.Unmarshal(b, &meta); err != nil || meta.ID != e.Name() {
			s.log.Warn("skip unreadable workspace record", "dir", e.Name(), "err", err)
			continue
		}
		s.adoptOne(ctx, meta)
		seen[meta.ID] = true
	}
	owned, err := container.List(ctx, s.docker, s.cfg.StateDir)
	if err != nil {
		s.log.Warn("list containers", "err", err)
		return
	}
	for _, c := range owned {
		if seen[c.WorkspaceID] {
			continue
		}
		if meta, ok := s.metaFromNotes(ctx, c); ok {
			if err := os.MkdirAll(filepath.Join(root, meta.ID, "sessions"), 0o755); err == nil {
				s.adoptOne(ctx, meta)
				seen[meta.ID] = true
				continue
			}
		}
		s.log.Warn("container labelled as ours has no workspace record; leaving it alone", "container", c.ID, "workspace_id", c.WorkspaceID)
	}
}

// metaFromNotes rebuilds a workspace record from its state note.
func (s *Service) metaFromNotes(ctx context.Context, c container.Owned) (wsMeta, bool) {
	info, err := s.docker.ContainerInspect(ctx, c.ID)
	if err != nil || info.Config == nil {
		return wsMeta{}, false
	}
	repoPath := info.Config.Labels[container.LabelRepo]
	if repoPath == "" {
		return wsMeta{}, false
	}
	repo, err := s.repo(ctx, repoPath)
	if err != nil {
		return wsMeta{}, false
	}
	wt, err := repo.Get(ctx, c.WorkspaceID)
	if err != nil || len(wt.Meta) == 0 {
		return wsMeta{}, false
	}
	var meta wsMeta
	if json.Unmarshal(wt.Meta, &meta) != nil || meta.ID != c.WorkspaceID {
		return wsMeta{}, false
	}
	meta.ContainerID = c.ID
	s.log.Info("workspace rebuilt from its state note", "workspace_id", meta.ID)
	return meta, true
}

// adoptOne registers a workspace from its record.
func (s *Service) adoptOne(ctx context.Context, meta wsMeta) {
	w := &workspace{svc: s, dir: filepath.Join(s.cfg.StateDir, "workspaces", meta.ID), meta: meta}
	if meta.Repo != "" {
		repo, err := s.repo(ctx, meta.Repo)
		if err != nil {
			w.why = "its repository cannot be opened: " + err.Error()
		} else {
			w.repo = repo
			if wt, err := repo.Get(ctx, meta.ID); err != nil {
				w.why = "its git workspace is gone: " + err.Error()
			} else if wt.Missing {
				w.why = "its worktree directory vanished (start repairs it)"
			}
		}
	}
	st, err := container.Inspect(ctx, s.docker, meta.ContainerID)
	switch {
	case errors.Is(err, container.ErrNotFound):
		w.status = client.StatusStopped
		if !meta.Stopped && w.why == "" {
			w.why = "its container was removed outside patina"
		}
	case err != nil:
		w.status = client.StatusStopped
		w.why = "its container cannot be inspected: " + err.Error()
	case st.Running && w.why == "":
		w.status = client.StatusRunning
	default:
		w.status = client.StatusStopped
		if !meta.Stopped && w.why == "" {
			w.why = "its container exited " + st.Error
		}
	}
	// Open the sessions in every case: a live one is reattached, a dead
	// one keeps its history readable.
	m, err := s.openSessions(ctx, w)
	if err != nil {
		s.log.Warn("open sessions", "workspace_id", meta.ID, "err", err)
		w.status = client.StatusStopped
		if w.why == "" {
			w.why = "its sessions cannot be opened: " + err.Error()
		}
	}
	w.sessions = m
	w.log = newEventLog(w.sink(), s.log)
	s.mu.Lock()
	s.workspaces[meta.ID] = w
	s.names[meta.Name] = meta.ID
	s.mu.Unlock()
	s.log.Info("workspace adopted", "workspace_id", meta.ID, "name", meta.Name, "status", w.status)
}
