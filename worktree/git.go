package worktree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// fixedConfig goes before every git command patina runs: no hooks, no
// signing, no fsmonitor daemons, no background gc, no colour or pager, no
// submodule recursion, predictable diff prefixes.
var fixedConfig = []string{
	"--no-pager",
	"-c", "core.hooksPath=/dev/null",
	"-c", "commit.gpgSign=false",
	"-c", "tag.gpgSign=false",
	"-c", "core.fsmonitor=false",
	"-c", "core.pager=cat",
	"-c", "color.ui=false",
	"-c", "gc.auto=0",
	"-c", "maintenance.auto=false",
	"-c", "submodule.recurse=false",
	"-c", "diff.noprefix=false",
	"-c", "diff.mnemonicPrefix=false",
	"-c", "merge.autoStash=false",
	"-c", "advice.detachedHead=false",
}

// keptGitEnv are the GIT_* variables passed through from patina's own
// environment: they choose the installation and its config files, never a
// repository, index or work tree.
var keptGitEnv = []string{"GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM", "GIT_EXEC_PATH"}

// runner runs every git command of a Repo.
type runner struct {
	path   string
	env    []string
	logger *slog.Logger
	// pin returns variables that pin git to the right repository for a
	// command run in dir (see pin.go); nil until the Repo is known.
	pin func(dir string) ([]string, error)
}

// gitCmd is one git invocation.
type gitCmd struct {
	dir   string
	args  []string
	stdin []byte
	env   []string // added to (and overriding) the runner's environment
}

func newRunner(path string, author Signature, logger *slog.Logger) *runner {
	return &runner{path: path, env: gitEnv(os.Environ(), author), logger: logger}
}

// gitEnv is base without any GIT_* variable (GIT_DIR, GIT_WORK_TREE,
// GIT_INDEX_FILE... leaking from a hook must not redirect patina) except
// keptGitEnv, plus a fixed locale, no prompts, no pager, no editor, no
// optional locks (git status must not rewrite the user's index) and
// author as author and committer.
func gitEnv(base []string, author Signature) []string {
	env := make([]string, 0, len(base)+16)
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "GIT_") && !slices.Contains(keptGitEnv, k):
		case k == "LANG" || k == "LANGUAGE" || strings.HasPrefix(k, "LC_"):
		case k == "PAGER" || k == "EDITOR" || k == "VISUAL":
		default:
			env = append(env, kv)
		}
	}
	return append(env,
		"LC_ALL=C",
		"LANGUAGE=",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_PAGER=cat",
		"PAGER=cat",
		"GIT_EDITOR=true",
		"GIT_MERGE_AUTOEDIT=no",
		"GIT_OPTIONAL_LOCKS=0",
		"GIT_AUTHOR_NAME="+author.Name,
		"GIT_AUTHOR_EMAIL="+author.Email,
		"GIT_COMMITTER_NAME="+author.Name,
		"GIT_COMMITTER_EMAIL="+author.Email,
	)
}

// run runs c and returns its standard output. A git that ran and failed is
// a *GitError; a cancelled context is returned as such.
func (g *runner) run(ctx context.Context, c gitCmd) ([]byte, error) {
	args := append(slices.Clip(fixedConfig), c.args...)
	cmd := exec.CommandContext(ctx, g.path, args...)
	cmd.Dir = c.dir
	cmd.Env = append(slices.Clip(g.env), c.env...)
	if g.pin != nil {
		pins, err := g.pin(c.dir)
		if err != nil {
			return nil, fmt.Errorf("git %s: %w", firstArg(c.args), err)
		}
		cmd.Env = append(cmd.Env, pins...)
	}
	if c.stdin != nil {
		cmd.Stdin = bytes.NewReader(c.stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// SIGTERM lets git remove its lock files (index.lock, ref locks) on
	// the way out; SIGKILL follows if it does not exit.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second

	start := time.Now()
	err := cmd.Run()
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	} else if err != nil {
		code = -1
	}
	g.logger.LogAttrs(ctx, slog.LevelDebug, "git",
		slog.Any("args", c.args), slog.String("dir", c.dir),
		slog.Int("exit_code", code), slog.Duration("duration", time.Since(start)))
	if err == nil {
		return stdout.Bytes(), nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return nil, fmt.Errorf("git %s: %w", firstArg(c.args), ctxErr)
	}
	if exitErr == nil {
		return nil, fmt.Errorf("git %s: %w", firstArg(c.args), err)
	}
	return stdout.Bytes(), &GitError{
		Args:     slices.Clone(c.args),
		Dir:      c.dir,
		ExitCode: code,
		Stderr:   stderr.String(),
		kind:     classify(stderr.String()),
	}
}

// out runs git in dir and returns its standard output without the trailing
// newline.
func (g *runner) out(ctx context.Context, dir string, args ...string) (string, error) {
	b, err := g.run(ctx, gitCmd{dir: dir, args: args})
	return strings.TrimRight(string(b), "\n"), err
}

// test runs a git command whose exit status 1 means "no" (merge-base
// --is-ancestor, diff --quiet, rev-parse --verify -q, symbolic-ref -q).
func (g *runner) test(ctx context.Context, dir string, args ...string) (bool, error) {
	_, err := g.run(ctx, gitCmd{dir: dir, args: args})
	switch {
	case err == nil:
		return true, nil
	case exitCode(err) == 1:
		return false, nil
	default:
		return false, err
	}
}

// exitCode is git's exit status in err, or -1 if err is not a *GitError.
func exitCode(err error) int {
	var ge *GitError
	if errors.As(err, &ge) {
		return ge.ExitCode
	}
	return -1
}

func firstArg(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}

// classify maps git's messages to sentinels. It is the only place in this
// package that reads git's human-readable text; LC_ALL=C keeps it English.
func classify(stderr string) error {
	has := func(s string) bool { return strings.Contains(stderr, s) }
	switch {
	case has("not a git repository"):
		return ErrNotFound
	case has("no note found"):
		return ErrNotFound
	case has("unknown revision"), has("bad revision"), has("Needed a single revision"),
		has("not a valid object name"), has("Not a valid object name"), has("invalid reference"):
		return ErrNotFound
	case has("would be overwritten by"), has("not uptodate. Cannot merge"), has("Your local changes"):
		return ErrDirty
	case has("Not possible to fast-forward"), has("CONFLICT"):
		return ErrConflict
	case has("already exists"):
		return ErrExists
	}
	return nil
}

// minGit is the oldest git patina supports: merge-tree --write-tree
// arrived in 2.38.
var minGit = [2]int{2, 38}

// parseGitVersion reads "git version 2.39.5" (and variants such as
// "git version 2.39.3 (Apple Git-146)" or "2.45.1.windows.1").
func parseGitVersion(s string) (major, minor int, err error) {
	f := strings.Fields(s)
	if len(f) < 3 || f[0] != "git" || f[1] != "version" {
		return 0, 0, fmt.Errorf("unrecognised git version %q", s)
	}
	parts := strings.SplitN(f[2], ".", 3)
	if len(parts) < 2 {
		return 0, 0, fmt.Errorf("unrecognised git version %q", s)
	}
	if major, err = strconv.Atoi(parts[0]); err != nil {
		return 0, 0, fmt.Errorf("unrecognised git version %q", s)
	}
	if minor, err = strconv.Atoi(parts[1]); err != nil {
		return 0, 0, fmt.Errorf("unrecognised git version %q", s)
	}
	return major, minor, nil
}

// checkedGit remembers git binaries whose version passed.
var checkedGit sync.Map // path -> struct{}

// checkVersion makes sure g's git is new enough, once per binary.
func (g *runner) checkVersion(ctx context.Context) error {
	if _, ok := checkedGit.Load(g.path); ok {
		return nil
	}
	out, err := g.out(ctx, "", "version")
	if err != nil {
		return fmt.Errorf("git version: %w", err)
	}
	major, minor, err := parseGitVersion(out)
	if err != nil {
		return err
	}
	if major < minGit[0] || major == minGit[0] && minor < minGit[1] {
		return fmt.Errorf("%w: %s is older than git %d.%d", ErrUnsupported, out, minGit[0], minGit[1])
	}
	checkedGit.Store(g.path, struct{}{})
	return nil
}

// catBlobs reads blobs by id in one `git cat-file --batch`. Missing ids are
// left out of the result.
func (g *runner) catBlobs(ctx context.Context, dir string, ids []string) (map[string][]byte, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	out, err := g.run(ctx, gitCmd{dir: dir, args: []string{"cat-file", "--batch"}, stdin: []byte(strings.Join(ids, "\n") + "\n")})
	if err != nil {
		return nil, err
	}
	return parseCatFileBatch(out)
}

// parseCatFileBatch parses `git cat-file --batch` output: for each object
// "<oid> <type> <size>\n<content>\n", or "<input> missing\n".
func parseCatFileBatch(out []byte) (map[string][]byte, error) {
	blobs := map[string][]byte{}
	for len(out) > 0 {
		header, rest, ok := bytes.Cut(out, []byte("\n"))
		if !ok {
			return nil, fmt.Errorf("cat-file: truncated header %q", header)
		}
		f := strings.Fields(string(header))
		if len(f) == 2 && f[1] == "missing" {
			out = rest
			continue
		}
		if len(f) != 3 {
			return nil, fmt.Errorf("cat-file: bad header %q", header)
		}
		size, err := strconv.Atoi(f[2])
		if err != nil || size < 0 || size+1 > len(rest) {
			return nil, fmt.Errorf("cat-file: bad size in %q", header)
		}
		blobs[f[0]] = rest[:size]
		out = rest[size+1:]
	}
	return blobs, nil
}
