package worktree

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Repo is one user repository opened by patina. It is safe for concurrent
// use; changes are serialised per repository across goroutines and
// processes (see DESIGN.md).
type Repo struct {
	cfg        Config
	git        *runner
	logger     *slog.Logger
	root       string   // main working tree, symlinks resolved
	commonDir  string   // common git dir, symlinks resolved
	objectsDir string   // <common>/objects
	objectDirs []string // objectsDir, then the repository's alternates
	format     objectFormat
	key        string // short stable hash of commonDir
	wtRoot     string // <StateDir>/worktrees/<key>: legacy worktrees
	lock       *repoLock
}

// Open opens the git repository containing path (any path inside its main
// working tree, one of the user's linked worktrees, or its git dir; never a
// workspace's directory, whose files are the workspace's). It fails with
// ErrNotFound if there is none, and ErrUnsupported for a bare repository, a
// git older than 2.38, or a Config.StateDir inside the working tree. It
// removes quarantines left by an import that crashed.
func Open(ctx context.Context, cfg Config, path string) (*Repo, error) {
	r, err := open(ctx, cfg, path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return r, nil
}

func open(ctx context.Context, cfg Config, path string) (*Repo, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	logger := cfg.Logger.With("component", "worktree")
	git := newRunner(cfg.GitPath, cfg.Author, logger)
	git.limits = procLimits{memory: cfg.GitMemoryBytes, cpu: cfg.GitCPUTime}
	if err := git.checkVersion(ctx); err != nil {
		return nil, err
	}

	dir, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: no such file or directory", ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		dir = filepath.Dir(dir)
	}

	common, err := git.out(ctx, dir, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("%w: not inside a git repository", ErrNotFound)
		}
		return nil, err
	}
	if common, err = filepath.EvalSymlinks(common); err != nil {
		return nil, err
	}
	bare, err := git.out(ctx, dir, "rev-parse", "--is-bare-repository")
	if err != nil {
		return nil, err
	}
	if bare == "true" {
		return nil, fmt.Errorf("%w: %s is a bare repository; patina needs a working tree to merge into", ErrUnsupported, common)
	}
	root, err := mainWorktree(ctx, git, dir, common)
	if err != nil {
		return nil, err
	}
	fmtName, err := git.out(ctx, root, "rev-parse", "--show-object-format")
	if err != nil {
		return nil, err
	}
	format, err := parseObjectFormat(fmtName)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnsupported, err)
	}

	sum := sha256.Sum256([]byte(common))
	key := hex.EncodeToString(sum[:])[:16]
	if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	stateDir, err := filepath.EvalSymlinks(cfg.StateDir)
	if err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	wtRoot := filepath.Join(stateDir, "worktrees", key)
	if within(wtRoot, root) {
		return nil, fmt.Errorf("%w: state dir %s is inside the repository's working tree %s; workspaces there would show up in the user's tree", ErrUnsupported, stateDir, root)
	}

	objects := filepath.Join(common, "objects")
	r := &Repo{
		cfg:        cfg,
		git:        git,
		logger:     logger.With("repo", root),
		root:       root,
		commonDir:  common,
		objectsDir: objects,
		objectDirs: objectDirs(objects),
		format:     format,
		key:        key,
		wtRoot:     wtRoot,
		lock:       lockFor(common, filepath.Join(common, lockFile)),
	}
	r.cleanQuarantines()
	return r, nil
}

// mainWorktree finds the top of the repository's main working tree without
// asking `git worktree list`, which reads every linked worktree's admin
// files (a legacy workspace could make those hang or lie): either dir is
// in the main working tree, or the main working tree is the directory
// holding the common git dir as ".git".
func mainWorktree(ctx context.Context, git *runner, dir, common string) (string, error) {
	top, topErr := git.out(ctx, dir, "rev-parse", "--show-toplevel")
	gitDir, err := git.out(ctx, dir, "rev-parse", "--path-format=absolute", "--git-dir")
	if topErr == nil && err == nil {
		if real, err := filepath.EvalSymlinks(gitDir); err == nil && real == common {
			return filepath.EvalSymlinks(top)
		}
	}
	if filepath.Base(common) == ".git" {
		cand := filepath.Dir(common)
		top, err := git.out(ctx, cand, "rev-parse", "--show-toplevel")
		if err == nil {
			if top, err = filepath.EvalSymlinks(top); err == nil && top == cand {
				return cand, nil
			}
		}
	}
	return "", fmt.Errorf("%w: cannot find the main working tree of %s", ErrUnsupported, common)
}

// Defaults of Config's limits on what a workspace sends and on host git.
const (
	defaultMaxSingleObject = 512 << 20
	defaultGitMemory       = 4 << 30
	defaultGitCPU          = 10 * time.Minute
)

func (c Config) withDefaults() (Config, error) {
	if c.StateDir == "" {
		base := os.Getenv("XDG_STATE_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return c, fmt.Errorf("worktree: no Config.StateDir and no home directory: %w", err)
			}
			base = filepath.Join(home, ".local", "state")
		}
		c.StateDir = filepath.Join(base, "patina")
	}
	abs, err := filepath.Abs(c.StateDir)
	if err != nil {
		return c, fmt.Errorf("worktree: state dir: %w", err)
	}
	c.StateDir = abs
	if c.Author == (Signature{}) {
		c.Author = DefaultAuthor
	}
	if err := validateSignature(c.Author); err != nil {
		return c, fmt.Errorf("worktree: Config.Author: %w", err)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.GitPath == "" {
		p, err := exec.LookPath("git")
		if err != nil {
			return c, fmt.Errorf("worktree: git not found: %w", err)
		}
		c.GitPath = p
	}
	if c.MaxPackBytes <= 0 {
		c.MaxPackBytes = 2 << 30
	}
	if c.MaxObjectBytes <= 0 {
		c.MaxObjectBytes = 4 * c.MaxPackBytes
	}
	if c.MaxSingleObjectBytes <= 0 {
		c.MaxSingleObjectBytes = min(defaultMaxSingleObject, c.MaxObjectBytes)
	}
	switch {
	case c.GitMemoryBytes == 0:
		c.GitMemoryBytes = defaultGitMemory
	case c.GitMemoryBytes < 0:
		c.GitMemoryBytes = 0
	}
	switch {
	case c.GitCPUTime == 0:
		c.GitCPUTime = defaultGitCPU
	case c.GitCPUTime < 0:
		c.GitCPUTime = 0
	}
	return c, nil
}

// Root is the top level of the repository's main working tree: where Apply
// stages changes and where HEAD is read as the default base.
func (r *Repo) Root() string { return r.root }

// GitCommonDir is the absolute path of the repository's common git dir.
func (r *Repo) GitCommonDir() string { return r.commonDir }

// ObjectDirs are the object directories a workspace borrows from (see
// Workspace.ObjectDirs), as found at Open.
func (r *Repo) ObjectDirs() []string { return append([]string(nil), r.objectDirs...) }

// WorktreesDir is where legacy workspaces of this repository had their
// worktrees: <StateDir>/worktrees/<repo-key>. The sidecar may keep its
// workspace directories there.
func (r *Repo) WorktreesDir() string { return r.wtRoot }

// branchRef is the full ref of a workspace's branch.
func branchRef(name string) string { return "refs/heads/" + BranchPrefix + name }

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// repoEnv pins git to the user's repository: never discovered from a
// directory, whatever lies around.
func (r *Repo) repoEnv() []string {
	return []string{"GIT_DIR=" + r.commonDir, "GIT_WORK_TREE=" + r.root}
}

// cmd is a git command on the user's repository, run at the top of its
// main working tree, with env added (a quarantine's, say).
func (r *Repo) cmd(env []string, args ...string) gitCmd {
	return gitCmd{dir: r.root, args: args, env: append(r.repoEnv(), env...)}
}

// run runs git on the user's repository and returns its trimmed output.
func (r *Repo) run(ctx context.Context, args ...string) (string, error) {
	return r.runEnv(ctx, nil, args...)
}

// runEnv is run with env added (a quarantine's, say).
func (r *Repo) runEnv(ctx context.Context, env []string, args ...string) (string, error) {
	b, err := r.git.run(ctx, r.cmd(env, args...))
	return strings.TrimRight(string(b), "\n"), err
}

// test runs a git command whose exit status 1 means "no" (merge-base
// --is-ancestor, rev-parse --verify -q).
func (r *Repo) test(ctx context.Context, env []string, args ...string) (bool, error) {
	_, err := r.git.run(ctx, r.cmd(env, args...))
	switch {
	case err == nil:
		return true, nil
	case exitCode(err) == 1:
		return false, nil
	default:
		return false, err
	}
}

// revParse resolves rev to an object id; a missing rev is ErrNotFound.
func (r *Repo) revParse(ctx context.Context, env []string, rev string) (string, error) {
	out, err := r.runEnv(ctx, env, "rev-parse", "-q", "--verify", "--end-of-options", rev)
	if exitCode(err) == 1 {
		return "", fmt.Errorf("%w: revision %q", ErrNotFound, strings.TrimSuffix(rev, "^{commit}"))
	}
	return out, err
}

// refExists reports whether a full ref exists.
func (r *Repo) refExists(ctx context.Context, ref string) (bool, error) {
	return r.test(ctx, nil, "rev-parse", "-q", "--verify", "--end-of-options", ref)
}

// isAncestor reports whether commit a is an ancestor of (or equal to) b.
func (r *Repo) isAncestor(ctx context.Context, env []string, a, b string) (bool, error) {
	return r.test(ctx, env, "merge-base", "--is-ancestor", a, b)
}
