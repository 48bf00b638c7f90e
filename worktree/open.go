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
)

// Repo is one user repository opened by patina. It is safe for concurrent
// use; changes are serialised per repository across goroutines and
// processes (see DESIGN.md).
type Repo struct {
	cfg       Config
	git       *runner
	logger    *slog.Logger
	root      string // main working tree, symlinks resolved
	commonDir string // common git dir, symlinks resolved
	key       string // short stable hash of commonDir
	wtRoot    string // <StateDir>/worktrees/<key>
	lock      *repoLock
}

// Open opens the git repository containing path (any path inside its main
// working tree, a linked worktree, or its git dir). It fails with
// ErrNotFound if there is none, and ErrUnsupported for a bare repository, a
// git older than 2.38, or a Config.StateDir inside the working tree.
func Open(ctx context.Context, cfg Config, path string) (*Repo, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	logger := cfg.Logger.With("component", "worktree")
	git := newRunner(cfg.GitPath, cfg.Author, logger)
	if err := git.checkVersion(ctx); err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}

	dir, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	fi, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("open %s: %w: no such file or directory", path, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if !fi.IsDir() {
		dir = filepath.Dir(dir)
	}

	common, err := git.out(ctx, dir, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("open %s: %w: not inside a git repository", path, ErrNotFound)
		}
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if common, err = filepath.EvalSymlinks(common); err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	wts, err := listWorktrees(ctx, git, common)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if len(wts) == 0 || wts[0].bare {
		return nil, fmt.Errorf("open %s: %w: %s is a bare repository; patina needs a working tree to merge into", path, ErrUnsupported, common)
	}
	root, err := filepath.EvalSymlinks(wts[0].path)
	if err != nil {
		return nil, fmt.Errorf("open %s: main working tree: %w", path, err)
	}

	sum := sha256.Sum256([]byte(common))
	key := hex.EncodeToString(sum[:])[:16]
	if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("open %s: state dir: %w", path, err)
	}
	stateDir, err := filepath.EvalSymlinks(cfg.StateDir)
	if err != nil {
		return nil, fmt.Errorf("open %s: state dir: %w", path, err)
	}
	wtRoot := filepath.Join(stateDir, "worktrees", key)
	if within(wtRoot, root) {
		return nil, fmt.Errorf("open %s: %w: state dir %s is inside the repository's working tree %s; worktrees there would show up in the user's tree", path, ErrUnsupported, stateDir, root)
	}

	r := &Repo{
		cfg:       cfg,
		git:       git,
		logger:    logger.With("repo", root),
		root:      root,
		commonDir: common,
		key:       key,
		wtRoot:    wtRoot,
		lock:      lockFor(common, filepath.Join(common, lockFile)),
	}
	git.pin = r.pinEnv
	return r, nil
}

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
	return c, nil
}

// Root is the top level of the repository's main working tree: where Apply
// stages changes and where HEAD is read as the default base.
func (r *Repo) Root() string { return r.root }

// GitCommonDir is the absolute path of the repository's common git dir.
func (r *Repo) GitCommonDir() string { return r.commonDir }

// WorktreesDir is where this repository's workspaces live:
// <StateDir>/worktrees/<repo-key>.
func (r *Repo) WorktreesDir() string { return r.wtRoot }

// pathFor is where the worktree of a workspace named name belongs.
func (r *Repo) pathFor(name string) string { return filepath.Join(r.wtRoot, name) }

// branchRef is the full ref of a workspace's branch.
func branchRef(name string) string { return "refs/heads/" + BranchPrefix + name }

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// run runs git at the top of the main working tree, for repository-wide
// commands (refs, notes, objects).
func (r *Repo) run(ctx context.Context, args ...string) (string, error) {
	return r.git.out(ctx, r.root, args...)
}

// revParse resolves rev to an object id; a missing rev is ErrNotFound.
func (r *Repo) revParse(ctx context.Context, dir, rev string) (string, error) {
	out, err := r.git.out(ctx, dir, "rev-parse", "-q", "--verify", "--end-of-options", rev)
	if exitCode(err) == 1 {
		return "", fmt.Errorf("%w: revision %q", ErrNotFound, strings.TrimSuffix(rev, "^{commit}"))
	}
	return out, err
}

// refExists reports whether a full ref exists.
func (r *Repo) refExists(ctx context.Context, ref string) (bool, error) {
	return r.git.test(ctx, r.root, "rev-parse", "-q", "--verify", "--end-of-options", ref)
}

// isAncestor reports whether commit a is an ancestor of (or equal to) b.
func (r *Repo) isAncestor(ctx context.Context, a, b string) (bool, error) {
	return r.git.test(ctx, r.root, "merge-base", "--is-ancestor", a, b)
}
