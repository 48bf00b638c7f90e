package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/sidecar/client"
	"github.com/patina-dev/patina/sidecar/container"
	"github.com/patina-dev/patina/worktree"
)

// workspace is one workspace: its record, its repository (nil for a scratch
// workspace) and its sessions (nil while its container is unavailable).
type workspace struct {
	svc *Service
	dir string // <state>/workspaces/<id>

	// life serialises lifecycle operations (stop, start, delete).
	life sync.Mutex

	mu       sync.Mutex
	meta     wsMeta
	repo     *worktree.Repo
	sessions *session.Manager
	status   string
	why      string // why it is stopped, when nobody asked
	deleted  bool
	log      *eventLog
	sessMu   sync.Mutex // serialises creating the default session
}

// wsMeta is workspace.json, and the state note's opaque meta for a
// repository workspace: what the sidecar needs to adopt it again.
type wsMeta struct {
	ID           string            `json:"id"`
	Name         string            `json:"name"`
	Repo         string            `json:"repo,omitempty"`
	Branch       string            `json:"branch,omitempty"`
	Worktree     string            `json:"worktree"`
	GitCommonDir string            `json:"git_common_dir,omitempty"`
	GitDir       string            `json:"git_dir,omitempty"` // the worktree's own git dir
	Base         string            `json:"base,omitempty"`
	BaseCommit   string            `json:"base_commit,omitempty"`
	Image        string            `json:"image"`
	Network      string            `json:"network"`
	MemoryMB     int64             `json:"memory_mb"`
	CPUs         float64           `json:"cpus"`
	PidsLimit    int64             `json:"pids_limit"`
	Env          map[string]string `json:"env,omitempty"`
	ContainerID  string            `json:"container_id,omitempty"`
	CreatedAt    time.Time         `json:"created_at"`
	// Stopped: a user stopped it (a dead container is then expected).
	Stopped bool `json:"stopped,omitempty"`
}

const metaFile = "workspace.json"

func (w *workspace) sessionsDir() string { return filepath.Join(w.dir, "sessions") }

// save writes workspace.json (and, for a repository workspace, the state
// note's meta).
func (w *workspace) save(ctx context.Context) error {
	w.mu.Lock()
	meta, repo := w.meta, w.repo
	w.mu.Unlock()
	b, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(w.dir, metaFile), append(b, '\n')); err != nil {
		return err
	}
	if repo != nil {
		if _, err := repo.SetMeta(ctx, meta.ID, b); err != nil {
			w.svc.log.Warn("write workspace meta to its state note", "workspace_id", meta.ID, "err", err)
		}
	}
	return nil
}

// snapshot returns the workspace's API view.
func (w *workspace) snapshot() client.Workspace {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.meta
	return client.Workspace{
		ID:          m.ID,
		Name:        m.Name,
		Branch:      m.Branch,
		Worktree:    m.Worktree,
		Repo:        m.Repo,
		Base:        m.Base,
		BaseCommit:  m.BaseCommit,
		Status:      w.status,
		Error:       w.why,
		Image:       m.Image,
		Network:     m.Network,
		MemoryMB:    m.MemoryMB,
		CPUs:        m.CPUs,
		PidsLimit:   m.PidsLimit,
		Env:         m.Env,
		ContainerID: m.ContainerID,
		CreatedAt:   m.CreatedAt,
	}
}

// manager returns the session manager of a running workspace, or
// errStopped saying why and how to start it.
func (w *workspace) manager() (*session.Manager, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.deleted {
		return nil, fmt.Errorf("%w: workspace %s was deleted", errNotFound, w.meta.Name)
	}
	if w.status != client.StatusRunning || w.sessions == nil {
		return nil, w.stoppedErrLocked()
	}
	return w.sessions, nil
}

func (w *workspace) stoppedErrLocked() error {
	why := "by request"
	if w.why != "" {
		why = "because " + w.why
	}
	return fmt.Errorf("workspace %s is %w %s; POST /v1/workspaces/%s/start (or `patina ws start %s`) starts it again, keeping its files and its sessions' state",
		w.meta.Name, errStopped, why, w.meta.Name, w.meta.Name)
}

// historyManager returns the session manager even while stopped, for
// reading history and output.
func (w *workspace) historyManager() (*session.Manager, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.deleted {
		return nil, fmt.Errorf("%w: workspace %s was deleted", errNotFound, w.meta.Name)
	}
	if w.sessions == nil {
		return nil, w.stoppedErrLocked()
	}
	return w.sessions, nil
}

// session returns session sid. "default" is created on first use by any
// session endpoint, while the workspace runs; forExec requires it to run.
func (w *workspace) session(ctx context.Context, sid string, forExec bool) (*session.Session, error) {
	var m *session.Manager
	var err error
	if forExec {
		m, err = w.manager()
	} else {
		m, err = w.historyManager()
	}
	if err != nil {
		return nil, err
	}
	s, err := m.Get(sid)
	if err == nil || sid != defaultSession || !errors.Is(err, session.ErrNotFound) {
		return s, w.explain(err)
	}
	w.sessMu.Lock()
	defer w.sessMu.Unlock()
	if s, err := m.Get(sid); err == nil {
		return s, nil
	}
	if _, err := w.manager(); err != nil {
		if forExec {
			return nil, err
		}
		return nil, fmt.Errorf("%w: session %q (it is created on first use while the workspace runs)", errNotFound, sid)
	}
	s, err = m.Create(ctx, session.CreateRequest{ID: defaultSession, Cwd: workdir})
	return s, w.explain(err)
}

const (
	defaultSession = "default"
	workdir        = "/workspace"
)

// explain turns a session's "ended" into "stopped" when the reason is that
// the workspace's container is gone: the error then says how to recover.
func (w *workspace) explain(err error) error {
	if err == nil || !(errors.Is(err, session.ErrEnded) || errors.Is(err, session.ErrClosed)) {
		return err
	}
	w.mu.Lock()
	id := w.meta.ContainerID
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, ierr := container.Inspect(ctx, w.svc.docker, id)
	switch {
	case errors.Is(ierr, container.ErrNotFound):
		w.markStopped("its container was removed outside patina")
	case ierr == nil && !st.Running:
		w.markStopped("its container exited " + st.Error)
	default:
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stoppedErrLocked()
}

// markStopped records that the container is gone or dead without a stop
// request.
func (w *workspace) markStopped(why string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.meta.Stopped || w.deleted {
		return
	}
	// Docker reports "die" before "destroy": the later, more precise
	// reason wins.
	w.status = client.StatusStopped
	w.why = why
	w.svc.log.Warn("workspace stopped behind patina's back", "workspace_id", w.meta.ID, "why", why)
}

// containerEvent reacts to Docker's events for the workspace's container.
func (w *workspace) containerEvent(action string) {
	w.mu.Lock()
	busy := w.meta.Stopped || w.deleted
	w.mu.Unlock()
	if busy {
		return
	}
	switch action {
	case "die":
		w.markStopped("its container exited")
	case "destroy":
		w.markStopped("its container was removed outside patina")
	}
}

// release lets go of the sessions (Shutdown) without ending them.
func (w *workspace) release() {
	w.mu.Lock()
	m := w.sessions
	l := w.log
	w.mu.Unlock()
	if m != nil {
		_ = m.Close()
	}
	if l != nil {
		l.close()
	}
}
