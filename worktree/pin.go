package worktree

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// A workspace's container can write its worktree, the .git file in it
// included, and its own admin directory under <common>/worktrees/, whose
// commondir file says where the repository is. Git run by patina on the
// host must not follow either to a repository (and a config, with filter
// drivers or an fsmonitor command) made inside the workspace. So every git
// command patina runs in one of its worktrees gets GIT_DIR, GIT_COMMON_DIR
// and GIT_WORK_TREE from what patina knows, never from those files.

// pinEnv is the environment that pins git to the repository for a command
// run in dir: nothing unless dir is one of patina's worktrees.
func (r *Repo) pinEnv(dir string) ([]string, error) {
	if dir == "" || filepath.Dir(filepath.Clean(dir)) != r.wtRoot {
		return nil, nil
	}
	admin, err := r.adminDir(dir)
	if err != nil {
		return nil, err
	}
	if err := r.restoreCommonDir(admin); err != nil {
		return nil, err
	}
	return []string{"GIT_DIR=" + admin, "GIT_COMMON_DIR=" + r.commonDir, "GIT_WORK_TREE=" + dir}, nil
}

// restoreCommonDir puts back the commondir file of admin (a worktree's git
// dir) if it names another repository: GIT_COMMON_DIR pins where git reads
// config and objects, but git (2.39) still reads refs through that file.
func (r *Repo) restoreCommonDir(admin string) error {
	file := filepath.Join(admin, "commondir")
	b, err := os.ReadFile(file)
	if err == nil {
		p := strings.TrimSpace(string(b))
		if !filepath.IsAbs(p) {
			p = filepath.Join(admin, p)
		}
		if real, err := filepath.EvalSymlinks(p); err == nil && real == r.commonDir {
			return nil
		}
	}
	r.logger.Warn("worktree's commondir file names another repository; restoring it", "git_dir", admin, "was", strings.TrimSpace(string(b)))
	if err := os.WriteFile(file, []byte("../..\n"), 0o644); err != nil {
		return fmt.Errorf("restore %s: %w", file, err)
	}
	return nil
}

// adminDir is the git directory of the worktree at path: the entry of
// <common>/worktrees whose gitdir file names path/.git (only that entry's
// own workspace can write it). The entry named after the worktree, which
// is what git worktree add makes, is tried first.
func (r *Repo) adminDir(path string) (string, error) {
	want := filepath.Join(path, ".git")
	wantFi, _ := os.Lstat(want)
	base := filepath.Join(r.commonDir, "worktrees")
	names := func(d string) bool {
		b, err := os.ReadFile(filepath.Join(d, "gitdir"))
		if err != nil {
			return false
		}
		got := filepath.Clean(strings.TrimSpace(string(b)))
		if got == want {
			return true
		}
		fi, err := os.Lstat(got)
		return err == nil && wantFi != nil && os.SameFile(fi, wantFi)
	}
	if d := filepath.Join(base, filepath.Base(path)); names(d) {
		return d, nil
	}
	ents, _ := os.ReadDir(base)
	for _, e := range ents {
		if d := filepath.Join(base, e.Name()); e.IsDir() && names(d) {
			return d, nil
		}
	}
	return "", fmt.Errorf("%w: git knows no worktree at %s (no entry in %s names it; repair the workspace)", ErrMissing, path, base)
}
