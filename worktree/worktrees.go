package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The user's linked worktrees are described by admin directories,
// <common>/worktrees/<id>, whose files git reads (gitdir, HEAD, commondir,
// config.worktree). A legacy workspace could write its own admin directory,
// so until it is migrated that directory may hold symlinks, FIFOs and lies.
// Patina therefore never runs `git worktree list` (which opens every gitdir
// file and hangs on a FIFO); it reads the admin files itself, without
// following links or blocking, and treats what they say as a claim to
// check, never as a place to run git.

// adminFileMax bounds an admin file patina reads.
const adminFileMax = 4096

// linkedWorktree is one linked worktree as its admin directory describes it.
type linkedWorktree struct {
	admin  string // <common>/worktrees/<id>
	dir    string // its working tree, as the gitdir file says
	branch string // full ref its HEAD file names; "" when detached
}

// linkedWorktrees reads the admin directories under <common>/worktrees.
// Entries that are not real directories or whose gitdir or HEAD file is
// not a small regular file in git's format are left out.
func (r *Repo) linkedWorktrees() []linkedWorktree {
	base := filepath.Join(r.commonDir, "worktrees")
	ents, err := os.ReadDir(base)
	if err != nil {
		return nil
	}
	var list []linkedWorktree
	for _, e := range ents {
		admin := filepath.Join(base, e.Name())
		if fi, err := os.Lstat(admin); err != nil || !fi.IsDir() {
			continue
		}
		b, err := readSmallFile(filepath.Join(admin, "gitdir"), adminFileMax)
		if err != nil {
			continue
		}
		dir, err := parseGitdirFile(b)
		if err != nil {
			continue
		}
		b, err = readSmallFile(filepath.Join(admin, "HEAD"), adminFileMax)
		if err != nil {
			continue
		}
		branch, err := parseHEADFile(b)
		if err != nil {
			continue
		}
		list = append(list, linkedWorktree{admin: admin, dir: dir, branch: branch})
	}
	return list
}

// isLegacyWorktreeDir reports whether dir is where patina put legacy
// worktrees of this repository (…/worktrees/<repo-key>/<name>, under any
// state dir): a directory a legacy workspace can write.
func (r *Repo) isLegacyWorktreeDir(dir string) bool {
	dir = filepath.Clean(dir)
	parent := filepath.Dir(dir)
	return within(dir, r.wtRoot) || filepath.Base(parent) == r.key && filepath.Base(filepath.Dir(parent)) == "worktrees"
}

// genuine reports whether lw is one of the user's worktrees: not a legacy
// workspace's directory, and its .git file points back at lw's admin
// directory (only the worktree's owner writes that file). Git run there
// then reads only the user's files.
func (r *Repo) genuine(lw linkedWorktree) bool {
	if r.isLegacyWorktreeDir(lw.dir) {
		return false
	}
	if fi, err := os.Lstat(lw.dir); err != nil || !fi.IsDir() {
		return false
	}
	b, err := readSmallFile(filepath.Join(lw.dir, ".git"), adminFileMax)
	if err != nil {
		return false
	}
	p, err := parseDotGitFile(b)
	if err != nil {
		return false
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(lw.dir, p)
	}
	real, err := filepath.EvalSymlinks(p)
	return err == nil && real == lw.admin
}

// checkedOut finds the working tree that has ref checked out: the main one
// or a genuine linked one of the user's. It returns dir "" if there is
// none, else the directory and the environment that pins git to it.
func (r *Repo) checkedOut(ctx context.Context, ref string) (dir string, env []string, err error) {
	head, err := r.symbolicHEAD(ctx, r.root, nil)
	if err != nil {
		return "", nil, err
	}
	if head == ref {
		return r.root, r.repoEnv(), nil
	}
	for _, lw := range r.linkedWorktrees() {
		if lw.branch != ref || !r.genuine(lw) {
			continue
		}
		env := []string{"GIT_DIR=" + lw.admin, "GIT_COMMON_DIR=" + r.commonDir, "GIT_WORK_TREE=" + lw.dir}
		head, err := r.symbolicHEAD(ctx, lw.dir, env)
		if err != nil {
			r.logger.Warn("cannot read a linked worktree's HEAD", "dir", lw.dir, "err", err)
			continue
		}
		if head == ref {
			return lw.dir, env, nil
		}
	}
	return "", nil, nil
}

// symbolicHEAD is the full ref HEAD names in the working tree at dir
// (env pins git to it; nil: the main one), "" when detached.
func (r *Repo) symbolicHEAD(ctx context.Context, dir string, env []string) (string, error) {
	if env == nil {
		env = r.repoEnv()
	}
	out, err := r.git.run(ctx, gitCmd{dir: dir, args: []string{"symbolic-ref", "-q", "HEAD"}, env: env})
	if exitCode(err) == 1 {
		return "", nil
	}
	return strings.TrimSpace(string(out)), err
}

// legacyAdminDirs finds the admin directories of the legacy workspace
// name, without running git and without trusting their files: entries of
// <common>/worktrees named name or name<digits> (what `git worktree add`
// made), real directories (Lstat), whose gitdir file names
// …/worktrees/<repo-key>/<name>/.git or is not a readable regular file at
// all (tampered with, or gone: no worktree of the user's is described by
// such an entry).
func (r *Repo) legacyAdminDirs(name string) []string {
	base := filepath.Join(r.commonDir, "worktrees")
	ents, err := os.ReadDir(base)
	if err != nil {
		return nil
	}
	var dirs []string
	for _, e := range ents {
		suffix, ok := strings.CutPrefix(e.Name(), name)
		if !ok || strings.Trim(suffix, "0123456789") != "" {
			continue
		}
		admin := filepath.Join(base, e.Name())
		if fi, err := os.Lstat(admin); err != nil || !fi.IsDir() {
			continue
		}
		b, err := readSmallFile(filepath.Join(admin, "gitdir"), adminFileMax)
		if err != nil {
			dirs = append(dirs, admin)
			continue
		}
		if dir, err := parseGitdirFile(b); err == nil && filepath.Base(dir) == name && r.isLegacyWorktreeDir(dir) {
			dirs = append(dirs, admin)
		}
	}
	return dirs
}

// removeLegacyAdmin removes the admin directories of the legacy workspace
// name (os.RemoveAll removes symlinks and FIFOs, never follows them), then
// lets git prune its worktree list if that is safe.
func (r *Repo) removeLegacyAdmin(ctx context.Context, name string) ([]string, error) {
	dirs := r.legacyAdminDirs(name)
	for _, d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			return nil, fmt.Errorf("remove legacy worktree admin dir %s: %w", d, err)
		}
		r.logger.Info("removed legacy worktree admin dir", "dir", d)
	}
	if len(dirs) > 0 {
		r.pruneWorktrees(ctx)
	}
	return dirs, nil
}

// pruneWorktrees runs `git worktree prune` unless an admin directory
// holds a gitdir file git would block on or follow (a FIFO, a symlink, a
// huge file): prune opens every one. A failure is only logged.
func (r *Repo) pruneWorktrees(ctx context.Context) {
	base := filepath.Join(r.commonDir, "worktrees")
	ents, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range ents {
		admin := filepath.Join(base, e.Name())
		fi, err := os.Lstat(admin)
		if err != nil || !fi.IsDir() {
			r.logger.Warn("not pruning worktrees: suspicious entry", "path", admin)
			return
		}
		if _, err := readSmallFile(filepath.Join(admin, "gitdir"), adminFileMax); err != nil && !errors.Is(err, os.ErrNotExist) {
			r.logger.Warn("not pruning worktrees: suspicious gitdir file", "path", admin, "err", err)
			return
		}
	}
	if _, err := r.run(ctx, "worktree", "prune"); err != nil {
		r.logger.Warn("git worktree prune", "err", err)
	}
}
