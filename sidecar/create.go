package sidecar

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/sidecar/client"
	"github.com/patina-dev/patina/sidecar/container"
	"github.com/patina-dev/patina/sidecar/image"
	"github.com/patina-dev/patina/worktree"
)

func (s *Service) handleCreateWorkspace(w http.ResponseWriter, r *http.Request) {
	var req client.CreateWorkspaceRequest
	if err := decode(w, r, &req, s.cfg.MaxBodyBytes, true); err != nil {
		writeError(w, err)
		return
	}
	ws, err := s.createWorkspace(r.Context(), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, ws.snapshot())
}

// validateCreate checks a request and fills in the defaults.
func (s *Service) validateCreate(req *client.CreateWorkspaceRequest) error {
	if req.Name != "" {
		if err := worktree.ValidateName(req.Name); err != nil {
			return fmt.Errorf("%w: %v", errInvalid, err)
		}
	}
	if req.Repo == "" && req.Base != "" {
		return fmt.Errorf("%w: base %q needs a repo", errInvalid, req.Base)
	}
	if req.Repo != "" && !filepath.IsAbs(req.Repo) {
		return fmt.Errorf("%w: repo must be an absolute path on the sidecar's machine, got %q", errInvalid, req.Repo)
	}
	switch req.Network {
	case "":
		req.Network = "bridge"
	case "bridge", "none":
	default:
		return fmt.Errorf("%w: network must be \"bridge\" or \"none\", got %q", errInvalid, req.Network)
	}
	for k := range req.Env {
		if !session.ValidEnvName(k) {
			return fmt.Errorf("%w: env: %q is not a valid variable name", errInvalid, k)
		}
	}
	switch {
	case req.MemoryMB < 0 || (req.MemoryMB > 0 && req.MemoryMB < 6):
		return fmt.Errorf("%w: memory_mb must be at least 6 (Docker's minimum), got %d", errInvalid, req.MemoryMB)
	case req.CPUs < 0 || req.CPUs > float64(runtime.NumCPU()):
		return fmt.Errorf("%w: cpus must be between 0 and %d (this machine's CPUs), got %g", errInvalid, runtime.NumCPU(), req.CPUs)
	case req.PidsLimit < 0:
		return fmt.Errorf("%w: pids_limit must not be negative", errInvalid)
	}
	if req.MemoryMB == 0 {
		req.MemoryMB = s.cfg.DefaultMemoryMB
	}
	if req.CPUs == 0 {
		req.CPUs = min(s.cfg.DefaultCPUs, float64(runtime.NumCPU()))
	}
	if req.PidsLimit == 0 {
		req.PidsLimit = s.cfg.DefaultPids
	}
	if req.Image == "" {
		req.Image = s.cfg.DefaultImage
	}
	return nil
}

// reserve claims a workspace name; release with unreserve.
func (s *Service) reserve(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.names[name]; ok || s.reserved[name] {
		return fmt.Errorf("%w: a workspace named %q exists", errExists, name)
	}
	if _, ok := s.workspaces[name]; ok {
		return fmt.Errorf("%w: %q is a workspace id", errExists, name)
	}
	s.reserved[name] = true
	return nil
}

func (s *Service) unreserve(name string) {
	s.mu.Lock()
	delete(s.reserved, name)
	s.mu.Unlock()
}

// createWorkspace makes the worktree (or scratch directory), the container
// and the session manager; on failure it undoes what it did.
func (s *Service) createWorkspace(ctx context.Context, req client.CreateWorkspaceRequest) (*workspace, error) {
	if err := s.validateCreate(&req); err != nil {
		return nil, err
	}
	if req.Name == "" {
		req.Name = "ws-" + randomHex(4)
	}
	if err := s.reserve(req.Name); err != nil {
		return nil, err
	}
	defer s.unreserve(req.Name)
	// The image first: nothing to undo if it is missing.
	if err := s.images.Ensure(ctx, image.EnsureRequest{Ref: req.Image, Logger: s.log}); err != nil {
		return nil, err
	}
	var undo []func()
	fail := func(err error) (*workspace, error) {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
		return nil, err
	}
	cleanup := context.WithoutCancel(ctx)

	meta := wsMeta{
		Name:      req.Name,
		Image:     req.Image,
		Network:   req.Network,
		MemoryMB:  req.MemoryMB,
		CPUs:      req.CPUs,
		PidsLimit: req.PidsLimit,
		Env:       req.Env,
		CreatedAt: time.Now().UTC(),
	}
	var repo *worktree.Repo
	if req.Repo != "" {
		r, err := s.repo(ctx, req.Repo)
		if err != nil {
			return fail(fmt.Errorf("%w: repo %s: %v", errInvalid, req.Repo, err))
		}
		wt, err := r.Create(ctx, worktree.CreateRequest{Name: req.Name, Base: req.Base, Image: req.Image})
		if errors.Is(err, worktree.ErrNotFound) {
			err = fmt.Errorf("%w: base: %w", errInvalid, err) // a field names nothing: 400, not 404
		}
		if err != nil {
			return fail(err)
		}
		undo = append(undo, func() { _ = r.Delete(cleanup, wt.ID, worktree.DeleteRequest{}) })
		repo = r
		meta.ID = wt.ID
		meta.Repo = wt.Repo
		meta.Branch = wt.Branch
		meta.Worktree = wt.Path
		meta.GitCommonDir = wt.GitCommonDir
		meta.GitDir = wt.GitDir
		meta.Base = wt.BaseRef
		if meta.Base == "" {
			meta.Base = req.Base
		}
		meta.BaseCommit = wt.BaseCommit
	} else {
		meta.ID = newID()
	}
	dir := filepath.Join(s.cfg.StateDir, "workspaces", meta.ID)
	if err := os.MkdirAll(filepath.Join(dir, "sessions"), 0o755); err != nil {
		return fail(err)
	}
	undo = append(undo, func() { _ = os.RemoveAll(dir) })
	if repo == nil {
		meta.Worktree = filepath.Join(dir, "scratch")
		if err := os.Mkdir(meta.Worktree, 0o755); err != nil {
			return fail(err)
		}
	}
	w := &workspace{svc: s, dir: dir, meta: meta, repo: repo}
	cid, err := container.Create(ctx, s.docker, w.containerSpec())
	if err != nil {
		return fail(err)
	}
	undo = append(undo, func() { _ = container.Remove(cleanup, s.docker, cid) })
	w.meta.ContainerID = cid
	w.prepareContainer(ctx)
	m, err := s.openSessions(ctx, w)
	if err != nil {
		return fail(err)
	}
	undo = append(undo, func() { _ = m.Close() })
	w.sessions = m
	w.status = client.StatusRunning
	w.log = newEventLog(w.sink(), s.log)
	if err := w.save(ctx); err != nil {
		w.log.close()
		return fail(err)
	}
	if repo == nil { // the worktree package logs a repository workspace's creation
		w.log.add(worktree.Event{Kind: worktree.EventCreated, Message: fmt.Sprintf("workspace %s (image %s)", meta.Name, meta.Image)})
	}

	s.mu.Lock()
	s.workspaces[w.meta.ID] = w
	s.names[w.meta.Name] = w.meta.ID
	s.mu.Unlock()
	s.log.Info("workspace created", "workspace_id", w.meta.ID, "name", w.meta.Name, "repo", w.meta.Repo, "container", cid[:12])
	return w, nil
}

// containerSpec is the workspace's container.
func (w *workspace) containerSpec() container.Spec {
	m := w.meta
	mounts := []container.Mount{
		{Source: m.Worktree, Target: workdir},
		{Source: w.sessionsDir(), Target: w.sessionsDir()},
	}
	mounts = append(mounts, gitMounts(m.GitCommonDir, m.GitDir, m.Worktree)...)
	return container.Spec{
		WorkspaceID: m.ID,
		Name:        m.Name,
		Repo:        m.Repo,
		StateDir:    w.svc.cfg.StateDir,
		Image:       m.Image,
		Env:         m.Env,
		MemoryMB:    m.MemoryMB,
		CPUs:        m.CPUs,
		PidsLimit:   m.PidsLimit,
		Network:     m.Network,
		Mounts:      mounts,
		WorkingDir:  workdir,
	}
}

// gitMounts makes git work inside a workspace's container: a worktree's
// .git file points at the repository's git dir by absolute path, so it is
// mounted there. Read-only, so that nothing in the workspace can change the
// repository's config, hooks or info/ (which git run on the host, by patina
// or by the user, would obey); writable are only what committing needs:
// objects, refs and their logs, and the worktree's own git dir (index,
// HEAD). Directories missing from the repository are made first (a bind
// mount needs its source).
func gitMounts(common, own, worktree string) []container.Mount {
	if common == "" {
		return nil
	}
	if own == "" {
		// Recorded before the worktree's git dir was (or git says nothing):
		// the dir git worktree add makes.
		own = filepath.Join(common, "worktrees", filepath.Base(worktree))
	}
	mounts := []container.Mount{{Source: common, Target: common, ReadOnly: true}}
	for _, dir := range []string{"objects", "refs", "logs", "reftable"} {
		p := filepath.Join(common, dir)
		if dir != "reftable" {
			_ = os.MkdirAll(p, 0o755)
		}
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			mounts = append(mounts, container.Mount{Source: p, Target: p})
		}
	}
	if fi, err := os.Stat(own); err == nil && fi.IsDir() {
		mounts = append(mounts, container.Mount{Source: own, Target: own})
	}
	return mounts
}

// prepareContainer gives a new container a git identity (system level, so
// a user's own git config inside overrides it): an agent's `git commit`
// must not fail with "Author identity unknown". Best effort: an image
// without git simply has none.
func (w *workspace) prepareContainer(ctx context.Context) {
	cfg := w.svc.cfg
	script := `command -v git >/dev/null || exit 0
git config --system --get user.name >/dev/null || git config --system user.name "$1"
git config --system --get user.email >/dev/null || git config --system user.email "$2"`
	l := &container.Launcher{API: w.svc.docker, ContainerID: w.meta.ContainerID}
	if _, err := l.Run(ctx, session.Process{Argv: []string{"sh", "-c", script, "sh", cfg.GitAuthorName, cfg.GitAuthorEmail}}); err != nil {
		w.svc.log.Debug("set git identity in container", "workspace_id", w.meta.ID, "err", err)
	}
}

// openSessions opens the workspace's session manager (reattaching to the
// sessions in its directory) with a launcher into its container.
func (s *Service) openSessions(ctx context.Context, w *workspace) (*session.Manager, error) {
	return session.Open(ctx, session.Config{
		Dir:            w.sessionsDir(),
		Launcher:       &container.Launcher{API: s.docker, ContainerID: w.meta.ContainerID},
		Logger:         s.base.With("workspace_id", w.meta.ID),
		OutputLimit:    s.cfg.OutputLimit,
		InterruptGrace: s.cfg.InterruptGrace,
	})
}

// sink is where the workspace's events go.
func (w *workspace) sink() logSink {
	if w.repo != nil {
		return noteSink{repo: w.repo, id: w.meta.ID}
	}
	return fileSink{path: filepath.Join(w.dir, "log.jsonl")}
}

func newID() string { return randomHex(8) }

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}
