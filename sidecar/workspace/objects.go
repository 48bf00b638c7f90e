package workspace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/patina-dev/patina/sidecar/engine"
	"github.com/patina-dev/patina/worktree"
)

// Object stores. A repository workspace on this host reads the objects of
// its base commit, and nothing else of the user's repository, from stores
// the sidecar keeps in <state>/objects/<repo-key>/ (0700 parents): each a
// read-only object directory holding one pack, with its index, written by
// host git from the user's repository alone (worktree.Repo.WriteCommitPack;
// never from anything a workspace wrote). A store's name says what it
// holds, so that it can be made again from its name alone:
//
//	<commit>           everything commit reaches (a full store)
//	<commit>-<parent>  what commit reaches and parent does not, parent
//	                   being an ancestor of commit with a full store
//
// A workspace borrows from one full store, or from a full store and one
// that extends it (Workspace.Objects, in its record: the host paths of
// their object directories, mounted read-only in its container, the first
// at /.patina/repo/objects, the next at /.patina/repo/objects-1, and named
// in its repository's alternates). Stores are shared by the workspaces of
// one base, made atomically (in a temporary directory, then renamed), made
// again if missing when a workspace starts, and removed once no workspace
// (running, stopped, a fork) borrows from them: at a workspace's deletion,
// and at the sidecar's start for any nobody's record names.

// Where stores live, below the state directory.
const (
	objectsDir = "objects"
	// tmpPrefix marks a store being made, trashPrefix one being removed.
	tmpPrefix   = ".tmp-"
	trashPrefix = ".trash-"
	// leftoverAge is how old a temporary directory must be for the sweep
	// to take it for a crash's leftover.
	leftoverAge = time.Minute
	// maxParentCandidates bounds the full stores considered as a new
	// store's parent (the newest first).
	maxParentCandidates = 16
)

// errNoStore: a path is not one of this sidecar's object stores.
var errNoStore = errors.New("no object store")

// objectStores keeps the object stores of one state directory.
type objectStores struct {
	root string // <state>/objects
	log  *slog.Logger
	// inUse reports whether a known workspace's record names the object
	// directory.
	inUse func(objects string) bool

	mu       sync.Mutex
	locks    map[string]*storeLock // by store directory: making, checking, removing
	holds    map[string]int        // by object directory: workspaces being made
	building map[string]bool       // temporary directories in use
}

// storeLock is a one-slot channel (waiting for it honours contexts) and
// the number of its takers and waiters (at zero it is forgotten).
type storeLock struct {
	ch    chan struct{}
	users int
}

func newObjectStores(root string, log *slog.Logger, inUse func(string) bool) *objectStores {
	return &objectStores{
		root:     root,
		log:      log,
		inUse:    inUse,
		locks:    map[string]*storeLock{},
		holds:    map[string]int{},
		building: map[string]bool{},
	}
}

// storeName is the name of the store of commit, extending parent ("": a
// full store).
func storeName(commit, parent string) string {
	if parent == "" {
		return commit
	}
	return commit + "-" + parent
}

// parseStoreName splits a store's name; ok is false for anything else.
func parseStoreName(name string) (commit, parent string, ok bool) {
	commit, parent, _ = strings.Cut(name, "-")
	if !isObjectID(commit) || (parent != "" && (!isObjectID(parent) || len(parent) != len(commit))) {
		return "", "", false
	}
	return commit, parent, true
}

// isObjectID reports whether s is a full sha1 or sha256 object id in
// lowercase hex.
func isObjectID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// objectsOf is a store directory's object directory (what is mounted).
func objectsOf(store string) string { return filepath.Join(store, "objects") }

// storeOf is the store directory of an object directory.
func storeOf(objects string) string { return filepath.Dir(objects) }

// repoDir is where the stores of repo live.
func (s *objectStores) repoDir(repo *worktree.Repo) string { return filepath.Join(s.root, repo.Key()) }

// lock takes the lock of a store directory, waiting as long as ctx allows.
func (s *objectStores) lock(ctx context.Context, store string) (func(), error) {
	s.mu.Lock()
	l, ok := s.locks[store]
	if !ok {
		l = &storeLock{ch: make(chan struct{}, 1)}
		s.locks[store] = l
	}
	l.users++
	s.mu.Unlock()
	done := func() {
		s.mu.Lock()
		if l.users--; l.users == 0 {
			delete(s.locks, store)
		}
		s.mu.Unlock()
	}
	select {
	case l.ch <- struct{}{}:
		return func() { <-l.ch; done() }, nil
	case <-ctx.Done():
		done()
		return nil, fmt.Errorf("wait for the object store %s: %w", filepath.Base(store), ctx.Err())
	}
}

// hold keeps object directories from being removed until release: a
// workspace being made borrows from them before its record is known.
func (s *objectStores) hold(objs ...string) {
	s.mu.Lock()
	for _, o := range objs {
		s.holds[o]++
	}
	s.mu.Unlock()
}

// release undoes hold.
func (s *objectStores) release(objs []string) {
	s.mu.Lock()
	for _, o := range objs {
		if s.holds[o]--; s.holds[o] <= 0 {
			delete(s.holds, o)
		}
	}
	s.mu.Unlock()
}

func (s *objectStores) held(objects string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.holds[objects] > 0
}

// acquire returns the object directories a new workspace at commit
// borrows from (a full store first), making what is missing, and holds
// them (release them once the workspace's record is known, or on failure).
func (s *objectStores) acquire(ctx context.Context, repo *worktree.Repo, commit string) ([]string, error) {
	if !isObjectID(commit) {
		return nil, fmt.Errorf("%w: %q is not a commit id", errNoStore, commit)
	}
	dir := s.repoDir(repo)
	if err := mkdirPrivate(dir); err != nil {
		return nil, err
	}
	// A full store of commit: the common case after the first workspace
	// of a base.
	if objs, ok, err := s.reuse(ctx, repo, filepath.Join(dir, commit)); ok || err != nil {
		return objs, err
	}
	// One that extends a full store still there.
	for _, name := range s.names(dir) {
		if c, p, ok := parseStoreName(name); ok && c == commit && p != "" {
			if objs, ok, err := s.reuse(ctx, repo, filepath.Join(dir, name)); ok || err != nil {
				return objs, err
			}
		}
	}
	// A new one: extending the nearest full store of an ancestor, else
	// whole.
	parent := ""
	var cands []string
	for _, name := range s.names(dir) {
		if c, p, ok := parseStoreName(name); ok && p == "" && c != commit && len(c) == len(commit) {
			cands = append(cands, c)
		}
	}
	if len(cands) > maxParentCandidates {
		cands = cands[:maxParentCandidates]
	}
	if len(cands) > 0 {
		p, ok, err := repo.NearestAncestor(ctx, commit, cands)
		if err != nil {
			s.log.Warn("look for an object store to extend; making a whole one", "commit", commit, "err", err)
		} else if ok {
			parent = p
		}
	}
	objs, err := s.ensure(ctx, repo, []string{filepath.Join(dir, storeName(commit, parent))}, true)
	if err != nil && parent != "" {
		s.log.Warn("extend an object store; making a whole one", "commit", commit, "parent", parent, "err", err)
		objs, err = s.ensure(ctx, repo, []string{filepath.Join(dir, commit)}, true)
	}
	return objs, err
}

// reuse holds the store (and its parent, made again if missing) when it
// is there; ok is false when it is not.
func (s *objectStores) reuse(ctx context.Context, repo *worktree.Repo, store string) ([]string, bool, error) {
	unlock, err := s.lock(ctx, store)
	if err != nil {
		return nil, false, err
	}
	present := storePresent(store)
	unlock()
	if !present {
		return nil, false, nil
	}
	objs, err := s.ensure(ctx, repo, []string{store}, true)
	if err != nil {
		return nil, false, err
	}
	return objs, true, nil
}

// ensure makes sure the stores exist (made again from their names if
// not) and returns their object directories, each store's parent before
// it. With hold, they are held (release them).
func (s *objectStores) ensure(ctx context.Context, repo *worktree.Repo, stores []string, hold bool) ([]string, error) {
	var objs []string
	fail := func(err error) ([]string, error) {
		if hold {
			s.release(objs)
		}
		return nil, err
	}
	for _, store := range stores {
		_, parent, ok := parseStoreName(filepath.Base(store))
		if !ok || filepath.Dir(filepath.Dir(store)) != s.root {
			return fail(fmt.Errorf("%w: %s is not an object store of this sidecar", errNoStore, store))
		}
		if parent != "" {
			po := objectsOf(filepath.Join(filepath.Dir(store), parent))
			if !containsString(objs, po) {
				p, err := s.ensureOne(ctx, repo, storeOf(po), hold)
				if err != nil {
					return fail(err)
				}
				objs = append(objs, p)
			}
		}
		o, err := s.ensureOne(ctx, repo, store, hold)
		if err != nil {
			return fail(err)
		}
		objs = append(objs, o)
	}
	return objs, nil
}

// ensureOne makes one store if it is missing (from its name), under its
// lock.
func (s *objectStores) ensureOne(ctx context.Context, repo *worktree.Repo, store string, hold bool) (string, error) {
	commit, parent, ok := parseStoreName(filepath.Base(store))
	if !ok {
		return "", fmt.Errorf("%w: %s", errNoStore, store)
	}
	unlock, err := s.lock(ctx, store)
	if err != nil {
		return "", err
	}
	defer unlock()
	objs := objectsOf(store)
	if !storePresent(store) {
		if err := s.build(ctx, repo, store, commit, parent); err != nil {
			return "", err
		}
	}
	if hold {
		s.hold(objs)
	}
	return objs, nil
}

// storePresent reports whether a store is complete: made whole (stores
// appear by a rename) and its pack and index still there.
func storePresent(store string) bool {
	ents, err := os.ReadDir(filepath.Join(objectsOf(store), "pack"))
	if err != nil {
		return false
	}
	have := map[string]bool{}
	for _, e := range ents {
		have[e.Name()] = true
	}
	for name := range have {
		if base, ok := strings.CutSuffix(name, ".idx"); ok && have[base+".pack"] {
			return true
		}
	}
	return false
}

// build makes a store (under its lock): a pack of what commit reaches
// (less what parent reaches), written in a temporary directory beside it
// and renamed into place. A broken store in the way is removed first.
func (s *objectStores) build(ctx context.Context, repo *worktree.Repo, store, commit, parent string) error {
	if _, err := os.Lstat(store); err == nil {
		if err := s.removeLocked(store); err != nil {
			return err
		}
	}
	if err := mkdirPrivate(filepath.Dir(store)); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(store), tmpPrefix)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.building[tmp] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.building, tmp)
		s.mu.Unlock()
		_ = os.RemoveAll(tmp)
	}()
	pack := filepath.Join(objectsOf(tmp), "pack")
	if err := os.MkdirAll(pack, 0o755); err != nil {
		return err
	}
	// Readable by any user in the container (a build dropping
	// privileges); the parents keep other host users out.
	for _, d := range []string{tmp, objectsOf(tmp)} {
		if err := os.Chmod(d, 0o755); err != nil {
			return err
		}
	}
	start := time.Now()
	p, err := repo.WriteCommitPack(ctx, worktree.CommitPackRequest{Commit: commit, Exclude: parent, Dir: pack})
	if err != nil {
		return fmt.Errorf("make the workspace's object store: %w", err)
	}
	if err := syncDir(pack); err != nil {
		return err
	}
	if err := os.Rename(tmp, store); err != nil {
		return err
	}
	_ = syncDir(filepath.Dir(store))
	s.log.Info("object store made", "repo", repo.Root(), "commit", commit, "extends", parent,
		"bytes", p.Bytes, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// collect removes the stores of these object directories that no
// workspace borrows from any more (a store's parent after it).
func (s *objectStores) collect(ctx context.Context, objs []string) {
	for i := len(objs) - 1; i >= 0; i-- {
		store := storeOf(objs[i])
		if _, _, ok := parseStoreName(filepath.Base(store)); !ok || filepath.Dir(filepath.Dir(store)) != s.root {
			continue
		}
		s.removeUnused(ctx, store)
	}
}

// removeUnused removes a store nobody borrows from, under its lock.
func (s *objectStores) removeUnused(ctx context.Context, store string) {
	unlock, err := s.lock(ctx, store)
	if err != nil {
		return
	}
	defer unlock()
	o := objectsOf(store)
	if s.inUse(o) || s.held(o) {
		return
	}
	if _, err := os.Lstat(store); err != nil {
		return
	}
	if err := s.removeLocked(store); err != nil {
		s.log.Warn("remove an object store", "store", store, "err", err)
		return
	}
	s.log.Info("object store removed: no workspace uses it", "store", store)
}

// removeLocked removes a store (under its lock): renamed out of the way
// first, so it is never seen half removed.
func (s *objectStores) removeLocked(store string) error {
	trash, err := os.MkdirTemp(filepath.Dir(store), trashPrefix)
	if err != nil {
		return err
	}
	gone := filepath.Join(trash, "store")
	if err := os.Rename(store, gone); err != nil {
		_ = os.Remove(trash)
		return err
	}
	return os.RemoveAll(trash)
}

// sweep removes every store no workspace's record names, and what made
// or removal left behind (a crash): at the sidecar's start, once the
// records are known.
func (s *objectStores) sweep(ctx context.Context) {
	repos, err := os.ReadDir(s.root)
	if err != nil {
		return
	}
	for _, r := range repos {
		dir := filepath.Join(s.root, r.Name())
		if !r.IsDir() {
			continue
		}
		for _, name := range s.names(dir) {
			if ctx.Err() != nil {
				return
			}
			if _, _, ok := parseStoreName(name); ok {
				s.removeUnused(ctx, filepath.Join(dir, name))
			}
		}
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if !strings.HasPrefix(e.Name(), tmpPrefix) && !strings.HasPrefix(e.Name(), trashPrefix) {
				continue
			}
			p := filepath.Join(dir, e.Name())
			s.mu.Lock()
			busy := s.building[p]
			s.mu.Unlock()
			// One made a moment ago may be a build that has not said so
			// yet.
			if fi, err := e.Info(); busy || err != nil || time.Since(fi.ModTime()) < leftoverAge {
				continue
			}
			_ = os.RemoveAll(p)
		}
	}
}

// names lists the entries of dir that look like stores, the newest first.
func (s *objectStores) names(dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	type named struct {
		name string
		mod  time.Time
	}
	var ns []named
	for _, e := range ents {
		if _, _, ok := parseStoreName(e.Name()); !ok || !e.IsDir() {
			continue
		}
		var mod time.Time
		if fi, err := e.Info(); err == nil {
			mod = fi.ModTime()
		}
		ns = append(ns, named{e.Name(), mod})
	}
	sort.Slice(ns, func(i, j int) bool { return ns[i].mod.After(ns[j].mod) })
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.name
	}
	return out
}

// objectsTarget is where the i-th object directory a workspace borrows
// from is mounted in its container.
func objectsTarget(i int) string {
	if i == 0 {
		return engine.RepoObjects
	}
	return fmt.Sprintf("%s-%d", engine.RepoObjects, i)
}

// mkdirPrivate makes dir and its missing parents 0700.
func mkdirPrivate(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.Chmod(dir, 0o700)
}

// syncDir flushes a directory's entries to disk.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
