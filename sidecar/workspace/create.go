package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"time"

	"github.com/distribution/reference"
	"github.com/google/uuid"

	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/sidecar/agent/wire"
	"github.com/patina-dev/patina/sidecar/disk"
	"github.com/patina-dev/patina/sidecar/engine"
	"github.com/patina-dev/patina/sidecar/hostdir"
	"github.com/patina-dev/patina/sidecar/secrets"
	"github.com/patina-dev/patina/worktree"
)

// Limits a create request may ask for.
const (
	maxMemoryMB = 1 << 20 // 1 TiB
	minCPUs     = 0.01    // Docker's smallest share
	maxPids     = 1 << 22 // Linux's pid_max ceiling
)

// validateCreate checks a request and fills in the defaults.
func (m *Manager) validateCreate(req *CreateRequest) error {
	if req.Name != "" {
		if err := worktree.ValidateName(req.Name); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalid, err)
		}
	}
	if req.Repo == "" && req.Base != "" {
		return fmt.Errorf("%w: base %q needs a repo", ErrInvalid, req.Base)
	}
	if req.Repo != "" && !filepath.IsAbs(req.Repo) {
		return fmt.Errorf("%w: repo must be an absolute path on the sidecar's machine, got %q", ErrInvalid, req.Repo)
	}
	pol, err := m.parseNetwork(req.Network)
	if err != nil {
		return err
	}
	np := policyInfo(pol)
	req.Network = &np
	for k, v := range req.Env {
		if !session.ValidEnvName(k) {
			return fmt.Errorf("%w: env: %q is not a valid variable name", ErrInvalid, k)
		}
		if containsNUL(v) {
			return fmt.Errorf("%w: env: the value of %s contains a NUL byte", ErrInvalid, k)
		}
	}
	if err := m.checkSecrets(req.Secrets, req.SecretEnv, req.Env); err != nil {
		return err
	}
	switch {
	case req.MemoryMB < 0 || (req.MemoryMB > 0 && req.MemoryMB < 6) || req.MemoryMB > maxMemoryMB:
		return fmt.Errorf("%w: memory_mb must be between 6 (Docker's minimum) and %d, got %d", ErrInvalid, maxMemoryMB, req.MemoryMB)
	case math.IsNaN(req.CPUs) || req.CPUs < 0 || (req.CPUs > 0 && req.CPUs < minCPUs) || req.CPUs > float64(runtime.NumCPU()):
		return fmt.Errorf("%w: cpus must be between %g and %d (this machine's CPUs), got %g", ErrInvalid, minCPUs, runtime.NumCPU(), req.CPUs)
	case req.PidsLimit < 0 || req.PidsLimit > maxPids:
		return fmt.Errorf("%w: pids_limit must be between 1 and %d, got %d", ErrInvalid, maxPids, req.PidsLimit)
	}
	if req.Image != "" {
		if _, err := reference.ParseNormalizedNamed(req.Image); err != nil {
			return fmt.Errorf("%w: image %q is not an image reference: %v", ErrInvalid, req.Image, err)
		}
	}
	if req.MemoryMB == 0 {
		req.MemoryMB = m.cfg.DefaultMemoryMB
	}
	if req.CPUs == 0 {
		req.CPUs = min(m.cfg.DefaultCPUs, float64(runtime.NumCPU()))
	}
	if req.PidsLimit == 0 {
		req.PidsLimit = m.cfg.DefaultPids
	}
	if req.Image == "" {
		req.Image = m.cfg.DefaultImage
	}
	if err := parseIdleStop(req.IdleStop); err != nil {
		return err
	}
	if err := m.checkPlacement(req.Placement); err != nil {
		return err
	}
	return nil
}

func containsNUL(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return true
		}
	}
	return false
}

// Create makes a workspace: for a repository, its branch (patina/<name>,
// at the base commit) and a directory for its files; its container; its
// agent; and, inside, its own repository. A failure undoes what was done.
func (m *Manager) Create(ctx context.Context, req CreateRequest) (Info, error) {
	imageGiven := req.Image != ""
	if err := m.validateCreate(&req); err != nil {
		return Info{}, err
	}
	if err := m.checkDisk(ctx, &req.DiskMB); err != nil {
		return Info{}, err
	}
	tpl, err := m.createTemplate(ctx, &req, imageGiven)
	if err != nil {
		return Info{}, err
	}
	req.Template, req.templateImage = tpl.Name, tpl.ImageID
	if w, ok, err := m.takePooled(ctx, req); ok || err != nil {
		return w, err
	}
	return m.create(ctx, req, nil)
}

// forkPlan is what create does differently for a fork: fill the new
// workspace (image, volumes, files) before its container starts, and give
// its sessions their shells back after its agent does.
type forkPlan struct {
	from string // the source workspace's id
	// target is the branch the source merges into by default (its base
	// ref when that is a branch): the fork, which starts at the source's
	// commit, keeps it.
	target string
	// prepare runs once the new workspace has its id and host directory,
	// before its container is created; it may change its meta (the image)
	// and add undo steps.
	prepare func(ctx context.Context, w *workspace, undo *[]func()) error
	// grants are the source's, with their placeholders (its sessions'
	// state holds them), when the fork keeps its secrets.
	grants []secrets.Grant
}

func (m *Manager) create(ctx context.Context, req CreateRequest, fork *forkPlan) (Info, error) {
	if req.Name == "" {
		req.Name = "ws-" + randomHex(4)
	}
	if err := m.reserve(req.Name); err != nil {
		return Info{}, err
	}
	defer m.unreserve(req.Name)
	ph := newPhases()
	// The image first: nothing to undo if it is missing.
	if err := m.images.Ensure(ctx, req.Image); err != nil {
		return Info{}, err
	}
	ph.mark("image")
	var undo []func()
	fail := func(err error) (Info, error) {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
		return Info{}, err
	}
	cleanup := context.WithoutCancel(ctx)

	md := meta{
		Format:        formatAgent,
		Name:          req.Name,
		Image:         req.Image,
		Template:      req.Template,
		TemplateImage: req.templateImage,
		Pooled:        ctx.Value(pooledKey{}) != nil,
		Network:       req.Network.Mode,
		NetworkAllow:  req.Network.Allow,
		IdleStop:      req.IdleStop,
		Placement:     req.Placement,
		MemoryMB:      req.MemoryMB,
		CPUs:          req.CPUs,
		PidsLimit:     req.PidsLimit,
		Env:           req.Env,
		SecretEnv:     req.SecretEnv,
		Secrets:       grantsFor(req.Secrets),
		DiskMB:        req.DiskMB,
		CreatedAt:     time.Now().UTC(),
		AgentToken:    randomHex(32),
	}
	var repo *worktree.Repo
	var held []string // object stores held until the workspace is registered
	defer func() { m.stores.release(held) }()
	if req.Repo != "" {
		r, err := m.repo(ctx, req.Repo)
		if err != nil {
			return fail(repoError(req.Repo, err))
		}
		wreq := worktree.CreateRequest{Name: req.Name, Base: req.Base, Image: req.Image}
		if fork != nil {
			wreq.Target = fork.target
		}
		wt, err := r.Create(ctx, wreq)
		if errors.Is(err, worktree.ErrNotFound) {
			err = fieldError("base", err) // a field names nothing: 400, not 404
		}
		if err != nil {
			return fail(err)
		}
		undo = append(undo, func() { _ = r.Delete(cleanup, wt.ID, worktree.DeleteRequest{}) })
		repo = r
		md.ID = wt.ID
		md.Repo = wt.Repo
		md.Branch = wt.Branch
		md.Base = wt.BaseRef
		if md.Base == "" {
			md.Base = req.Base
		}
		md.BaseCommit = wt.BaseCommit
		if m.eng.Local() {
			// The objects of its base, and nothing else of the user's
			// repository: a store shared with the workspaces of that base.
			objs, err := m.stores.acquire(ctx, r, wt.BaseCommit)
			if err != nil {
				return fail(err)
			}
			held = objs
			undo = append(undo, func() {
				m.stores.release(objs)
				held = nil
				m.stores.collect(cleanup, objs)
			})
			md.Objects = objs
			if md.DiskMB == 0 { // else its files are on its disk
				md.Worktree = filepath.Join(r.WorktreesDir(), wt.Name)
			}
		} else {
			md.Shipped = true // files in a volume, objects sent (ship.go)
		}
	} else {
		// A uuid, as a repository workspace's id is (older scratch
		// workspaces have 16 hex digits, and keep them).
		md.ID = uuid.NewString()
	}
	ph.mark("repo")
	w := newWorkspace(m, md)
	if err := os.MkdirAll(w.dir, 0o700); err != nil {
		return fail(err)
	}
	undo = append(undo, func() { _ = os.RemoveAll(w.dir) })
	if md.Worktree != "" {
		if err := m.makeWorktreeDir(md.Worktree); err != nil {
			return fail(err)
		}
		undo = append(undo, func() { m.removeWorktreeDir(md.Worktree) })
	}
	switch {
	case fork != nil:
		w.meta.ForkOf = fork.from
		w.meta.Secrets = fork.grants
		if err := fork.prepare(ctx, w, &undo); err != nil {
			return fail(err)
		}
		md = w.meta
	case md.DiskMB > 0:
		if _, err := m.cfg.Disks.Create(ctx, md.ID, md.DiskMB); err != nil {
			return fail(fmt.Errorf("make the workspace's disk: %w", err))
		}
		undo = append(undo, func() { _ = m.cfg.Disks.Remove(cleanup, md.ID) })
	}
	ph.mark("disk")
	cid, err := m.eng.Create(ctx, w.spec())
	if err != nil {
		return fail(err)
	}
	ph.mark("container")
	undo = append(undo, func() {
		_ = m.eng.Remove(cleanup, cid)
		_ = m.eng.RemoveVolumes(cleanup, md.ID)
	})
	w.mu.Lock()
	w.meta.ContainerID, w.meta.AgentProtocol = cid, wire.ProtocolVersion
	w.repo = repo
	w.agent = w.newAgentClient()
	w.mu.Unlock()
	undo = append(undo, func() { w.release() })
	undo = append(undo, func() { m.cfg.Network.Forget(md.ID) })
	if err := w.applyNetwork(ctx); err != nil {
		return fail(err)
	}
	ph.mark("network")
	if err := w.startAgent(ctx); err != nil {
		return fail(err)
	}
	ph.mark("agent")
	if repo != nil {
		if err := w.gitInit(ctx, false); err != nil {
			return fail(err)
		}
		ph.mark("git")
	}
	if fork != nil {
		// The sessions came with the state volume, their shells did not:
		// each gets a new one with the state of its last snapshot.
		c, _ := w.agentClient()
		if _, err := c.Revive(ctx, ""); err != nil {
			m.log.Warn("fork: revive sessions", "workspace_id", md.ID, "err", err)
		}
	}
	w.mu.Lock()
	w.status = StatusRunning
	w.log = newEventLog(w.sink(), m.log, m.cfg.Redactor.Redact)
	w.mu.Unlock()
	if err := w.save(ctx); err != nil {
		return fail(err)
	}
	if repo == nil { // the worktree package logs a repository workspace's creation
		w.log.add(worktree.Event{Kind: worktree.EventCreated, Message: fmt.Sprintf("workspace %s (image %s)", md.Name, md.Image)})
	}
	close(w.adopted)
	m.register(w)
	ph.mark("save")
	m.log.Debug("workspace create timings", append([]any{"workspace_id", md.ID}, ph.log()...)...)
	m.log.Info("workspace created", "workspace_id", md.ID, "name", md.Name, "repo", md.Repo, "container", shortID(cid))
	return w.view(), nil
}

// makeWorktreeDir makes a repository workspace's host directory (its
// parents 0700: no other host user reaches what the workspace writes) and
// seals it (nosuid, nodev).
func (m *Manager) makeWorktreeDir(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return err
	}
	_ = os.Chmod(filepath.Dir(dir), 0o700)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	m.seal(dir)
	return nil
}

// seal makes dir nosuid,nodev where this process may mount.
func (m *Manager) seal(dir string) {
	if err := hostdir.Seal(dir); err != nil {
		m.log.Warn("cannot make the worktree nosuid,nodev (its parents stay 0700)", "dir", dir, "err", err)
	}
}

// removeWorktreeDir unseals and removes a worktree directory (after its
// container is gone: nothing writes it any more). RemoveAll never follows
// a symlink the workspace left.
func (m *Manager) removeWorktreeDir(dir string) {
	_ = hostdir.Unseal(dir)
	if err := os.RemoveAll(dir); err != nil {
		m.log.Warn("remove the worktree", "dir", dir, "err", err)
	}
}

// spec is the workspace's container.
func (w *workspace) spec() engine.Spec {
	md := w.meta
	img := md.Image
	if md.ImageID != "" {
		img = md.ImageID
	}
	s := engine.Spec{
		WorkspaceID: md.ID,
		Name:        md.Name,
		Repo:        md.Repo,
		Image:       img,
		Env:         md.Env,
		MemoryMB:    md.MemoryMB,
		CPUs:        md.CPUs,
		PidsLimit:   md.PidsLimit,
		Network:     md.Network,
		Files:       md.Worktree,
		Disk:        w.diskPath(),
		Placement:   md.Placement,
		Agent:       engine.AgentStart{WorkspaceID: md.ID, Token: md.AgentToken, Args: w.agentArgs()},
	}
	for i, d := range md.Objects {
		s.Mounts = append(s.Mounts, engine.Mount{Source: d, Target: objectsTarget(i), ReadOnly: true})
	}
	for i, d := range md.ObjectDirs {
		s.Mounts = append(s.Mounts, engine.Mount{Source: d, Target: legacyObjectsTarget(i, d), ReadOnly: true})
	}
	return s
}

// diskPath is where the workspace's disk is mounted on the host ("": it
// has none).
func (w *workspace) diskPath() string {
	if w.meta.DiskMB == 0 || w.m.cfg.Disks == nil {
		return ""
	}
	return w.m.cfg.Disks.Path(w.meta.ID)
}

// checkDisk checks a request's disk_mb, and gives a workspace that names
// none the default disk where disks can be had.
func (m *Manager) checkDisk(ctx context.Context, mb *int64) error {
	if *mb < 0 {
		return fmt.Errorf("%w: disk_mb must be positive, got %d", ErrInvalid, *mb)
	}
	why := m.diskSupport(ctx)
	if why != nil {
		if *mb > 0 {
			return fmt.Errorf("%w: disk_mb: %v", ErrUnsupported, why)
		}
		return nil
	}
	size := m.cfg.Disks.SizeMB()
	if *mb == 0 {
		*mb = min(m.cfg.DefaultDiskMB, size)
		return nil
	}
	if *mb < disk.MinMB || *mb > size {
		return fmt.Errorf("%w: disk_mb must be between %d and %d (the sidecar's disk pool), got %d", ErrInvalid, disk.MinMB, size, *mb)
	}
	return nil
}

// diskSupport says whether workspaces get disks (nil) or why not.
func (m *Manager) diskSupport(ctx context.Context) error {
	if m.cfg.Disks == nil {
		if m.cfg.DisksWhy != nil {
			return m.cfg.DisksWhy
		}
		return errors.New("this sidecar keeps no disks for workspaces")
	}
	return m.eng.DiskSupport(ctx)
}

// legacyObjectsTarget is where a workspace made before the object stores
// had the i-th object directory of the user's repository mounted: the
// first at a fixed place, the others (the repository's own alternates) at
// their host paths, where the repository's alternates file names them.
func legacyObjectsTarget(i int, hostDir string) string {
	if i == 0 {
		return engine.RepoObjects
	}
	return hostDir
}

// alternates are the object directories, in the container, that the
// workspace's repository borrows from.
func (md meta) alternates() []string {
	var alts []string
	for i := range md.Objects {
		alts = append(alts, objectsTarget(i))
	}
	for i, d := range md.ObjectDirs {
		alts = append(alts, legacyObjectsTarget(i, d))
	}
	return alts
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// placer is an engine that places workspaces on a cluster's nodes (Swarm).
type placer interface{ Places() bool }

// Limits of placement constraints.
const (
	maxPlacement    = 16
	maxPlacementLen = 256
)

// placementRE is one Swarm constraint: an attribute, == or !=, a value.
var placementRE = regexp.MustCompile(`^(node\.(id|hostname|role|platform\.os|platform\.arch)|node\.labels\.[A-Za-z0-9_.-]+|engine\.labels\.[A-Za-z0-9_.-]+)\s*(==|!=)\s*[A-Za-z0-9_.:/-]+$`)

// checkPlacement refuses constraints on an engine that does not place
// workspaces, and constraints that are not node.X==Y or node.X!=Y.
func (m *Manager) checkPlacement(ps []string) error {
	if len(ps) == 0 {
		return nil
	}
	if p, ok := m.eng.(placer); !ok || !p.Places() {
		return fmt.Errorf("%w: placement needs a cluster: run the sidecar with --engine swarm", ErrInvalid)
	}
	if len(ps) > maxPlacement {
		return fmt.Errorf("%w: at most %d placement constraints", ErrInvalid, maxPlacement)
	}
	for _, c := range ps {
		if len(c) > maxPlacementLen || !placementRE.MatchString(c) {
			return fmt.Errorf("%w: placement constraint %q must be node.ATTR==VALUE or node.ATTR!=VALUE (node.id, node.hostname, node.role, node.platform.os, node.platform.arch, node.labels.NAME, engine.labels.NAME), at most %d bytes", ErrInvalid, c, maxPlacementLen)
		}
	}
	return nil
}

// repoError is the 400 for a create's repo that cannot be opened, in the
// user's terms.
func repoError(repo string, err error) error {
	if errors.Is(err, worktree.ErrNotFound) {
		return fmt.Errorf("%w: repo %s: no git repository there on the sidecar's machine: give the absolute path of a git checkout on it", ErrInvalid, repo)
	}
	return fmt.Errorf("%w: repo %s: %v", ErrInvalid, repo, err)
}
