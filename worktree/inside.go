package worktree

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// Inside works on a workspace's own repository from inside its container:
// the workspace's agent runs it on /workspace. It makes the repository
// (Init), reports its state with a snapshot of uncommitted work (State),
// commits (Commit) and writes pack streams for the host (Pack), which the
// sidecar hands to Repo.Record, Diff and Apply as a Source. It never sees
// the user's repository, only its objects through alternates (read-only).
//
// Everything in the container is the agent's: Inside's git runs with the
// same fixed options as the host's (no hooks, no fsmonitor...) for
// predictable results, not for protection.
type Inside struct {
	// Dir is the workspace's directory; its git dir is Dir/.git.
	Dir string
	// GitPath is the git binary; default "git" from $PATH.
	GitPath string
	// Author is the committer of Commit and its default author; default
	// DefaultAuthor.
	Author Signature
	// Logger receives debug lines for every git call; default discard.
	Logger *slog.Logger

	once sync.Once
	git  *runner
	err  error
}

// initMarker is set in the workspace's config when Init has completed.
const initMarker = "patina.initialized"

// runner builds in's git runner once.
func (in *Inside) runner() (*runner, error) {
	in.once.Do(func() {
		path := in.GitPath
		if path == "" {
			p, err := exec.LookPath("git")
			if err != nil {
				in.err = fmt.Errorf("worktree: git not found: %w", err)
				return
			}
			path = p
		}
		if !filepath.IsAbs(in.Dir) {
			in.err = fmt.Errorf("worktree: Inside.Dir %q is not absolute", in.Dir)
			return
		}
		author := in.Author
		if author == (Signature{}) {
			author = DefaultAuthor
		}
		if err := validateSignature(author); err != nil {
			in.err = fmt.Errorf("worktree: Inside.Author: %w", err)
			return
		}
		logger := in.Logger
		if logger == nil {
			logger = slog.New(slog.DiscardHandler)
		}
		in.git = newRunner(path, author, logger.With("component", "worktree-inside"))
		// The directory may belong to another user than the agent's.
		in.git.extra = []string{"-c", "safe.directory=" + filepath.Clean(in.Dir)}
	})
	return in.git, in.err
}

// gitDir is Dir/.git.
func (in *Inside) gitDir() string { return filepath.Join(in.Dir, ".git") }

// cmd is a git command in the workspace, pinned to Dir/.git and Dir.
func (in *Inside) cmd(env []string, args ...string) gitCmd {
	return gitCmd{
		dir:  in.Dir,
		args: args,
		env:  append([]string{"GIT_DIR=" + in.gitDir(), "GIT_WORK_TREE=" + in.Dir}, env...),
	}
}

// run runs git in the workspace and returns its trimmed output.
func (in *Inside) run(ctx context.Context, env []string, args ...string) (string, error) {
	g, err := in.runner()
	if err != nil {
		return "", err
	}
	b, err := g.run(ctx, in.cmd(env, args...))
	return strings.TrimRight(string(b), "\n"), err
}

// head is the HEAD commit.
func (in *Inside) head(ctx context.Context) (string, error) {
	out, err := in.run(ctx, nil, "rev-parse", "-q", "--verify", "HEAD^{commit}")
	if exitCode(err) == 1 {
		return "", fmt.Errorf("%w: HEAD of %s names no commit (unborn branch?)", ErrNotFound, in.Dir)
	}
	return out, err
}

// checkOIDs refuses anything but full hex object ids.
func checkOIDs(what string, oids []string) error {
	for _, oid := range oids {
		if !isHex(oid) || len(oid) != 40 && len(oid) != 64 {
			return &NameError{What: "object id", Name: oid, Rule: what + " must be 40 or 64 lowercase hex digits"}
		}
	}
	return nil
}

// tempIndex makes a copy of the workspace's index for a command that must
// not write the real one, keeping its mtime (git's racy-clean check
// compares entries with it). A missing, non-regular or unreadable index
// gives no copy (git then starts from an empty index: slower, but right).
func (in *Inside) tempIndex() (path string, remove func(), err error) {
	f, err := os.CreateTemp(in.gitDir(), "patina-index-")
	if err != nil {
		return "", nil, err
	}
	path = f.Name()
	remove = func() {
		os.Remove(path)
		os.Remove(path + ".lock")
	}
	if err := copyIndex(f, filepath.Join(in.gitDir(), "index")); err != nil {
		os.Remove(path)
	}
	return path, remove, nil
}

// copyIndex copies the index at src into f and closes f.
func copyIndex(f *os.File, src string) error {
	defer f.Close()
	in, err := openNoFollow(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return errNotRegular
	}
	if _, err := io.Copy(f, in); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Chtimes(f.Name(), st.ModTime(), st.ModTime())
}
