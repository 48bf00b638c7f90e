package worktree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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

// gitTermWait is how long a cancelled git command has after SIGTERM (to
// remove its lock files) before it is killed.
const gitTermWait = 5 * time.Second

// fixedConfig goes before every git command patina runs: no hooks, no
// signing, no fsmonitor daemons, no background gc, no colour or pager, no
// submodule recursion, predictable diff prefixes, and checkouts that refuse
// paths which are .git in disguise on any file system.
var fixedConfig = []string{
	"--no-pager",
	"-c", "core.hooksPath=/dev/null",
	"-c", "commit.gpgSign=false",
	"-c", "tag.gpgSign=false",
	"-c", "core.fsmonitor=false",
	"-c", "core.pager=cat",
	"-c", "core.protectNTFS=true",
	"-c", "core.protectHFS=true",
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

// Output bounds. Every git call either streams its output to a consumer
// that decides when to stop, or has it captured up to a cap.
const (
	// defaultOutputLimit caps the captured standard output of a git call
	// that does not set its own limit.
	defaultOutputLimit = 32 << 20
	// stderrLimit is how much of git's standard error is kept.
	stderrLimit = 64 << 10
)

// runner runs every git command of a Repo or an Inside.
type runner struct {
	path   string
	env    []string
	extra  []string   // more -c options after fixedConfig
	limits procLimits // set on every process (the host's runner only)
	logger *slog.Logger
}

// gitCmd is one git invocation.
type gitCmd struct {
	dir   string
	args  []string
	stdin io.Reader
	env   []string // added to (and overriding) the runner's environment
	// limit caps the captured standard output (run); 0 means
	// defaultOutputLimit. Beyond it git is stopped and run fails with
	// ErrTooLarge.
	limit int64
}

func newRunner(path string, author Signature, logger *slog.Logger) *runner {
	return &runner{path: path, env: gitEnv(os.Environ(), author), logger: logger}
}

// gitEnv is base without any GIT_* variable (GIT_DIR, GIT_WORK_TREE,
// GIT_INDEX_FILE, GIT_OBJECT_DIRECTORY... leaking from a hook must not
// redirect patina) except keptGitEnv, plus a fixed locale, no prompts, no
// pager, no editor, no optional locks (git status must not rewrite the
// user's index) and author as author and committer.
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

// errOutOfMemory is git failing to allocate: under patina's limits, the
// work was too large.
var errOutOfMemory = fmt.Errorf("%w: git ran out of memory", ErrTooLarge)

// errStopped is returned by a stream consumer that has read enough; the
// runner then stops git and reports no error.
var errStopped = errors.New("stopped reading")

// run runs c and returns its standard output, at most c.limit bytes (see
// gitCmd.limit). A git that ran and failed is a *GitError; a cancelled
// context is returned as such.
func (g *runner) run(ctx context.Context, c gitCmd) ([]byte, error) {
	limit := c.limit
	if limit <= 0 {
		limit = defaultOutputLimit
	}
	var out bytes.Buffer
	over := false
	err := g.stream(ctx, c, func(r io.Reader) error {
		n, err := io.Copy(&out, io.LimitReader(r, limit+1))
		if err != nil {
			return err
		}
		if n > limit {
			over = true
			return errStopped
		}
		return nil
	})
	if over && err == nil {
		return nil, fmt.Errorf("git %s: %w: output longer than %d bytes", firstArg(c.args), ErrTooLarge, limit)
	}
	return out.Bytes(), err
}

// stream runs c and hands its standard output to consume. If consume
// returns before reading to the end, git is stopped (SIGTERM, then SIGKILL);
// consume returning errStopped means it read all it wanted, and stream
// then returns nil. Other errors from consume are returned as they are.
// Standard input, when c.stdin is set, is copied in by a goroutine that
// stream does not wait for: a reader that blocks must be unblocked by its
// owner (closing it) after stream returns.
func (g *runner) stream(ctx context.Context, c gitCmd, consume func(io.Reader) error) error {
	args := append(slices.Clip(fixedConfig), g.extra...)
	args = append(args, c.args...)
	gctx, stop := context.WithCancel(ctx)
	defer stop()
	cmd := exec.CommandContext(gctx, g.path, args...)
	cmd.Dir = c.dir
	cmd.Env = append(slices.Clip(g.env), c.env...)
	stderr := &capBuffer{max: stderrLimit}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("git %s: %w", firstArg(c.args), err)
	}
	var stdin io.WriteCloser
	if c.stdin != nil {
		if stdin, err = cmd.StdinPipe(); err != nil {
			return fmt.Errorf("git %s: %w", firstArg(c.args), err)
		}
	}
	// SIGTERM lets git remove its lock files (index.lock, ref locks) on
	// the way out; SIGKILL follows if it does not exit.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = gitTermWait

	start := time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("git %s: %w", firstArg(c.args), err)
	}
	// Bound git before it reads a byte of its input (see procLimits).
	if g.limits.on() {
		if err := g.limits.apply(cmd.Process.Pid); err != nil {
			stop()
			_ = cmd.Wait()
			return fmt.Errorf("git %s: setting its limits (%s): %w", firstArg(c.args), g.limits, err)
		}
	}
	// An input that fails (a pack the scanner refused, a stream cut)
	// stops git at once: whatever it would make of the rest is wrong.
	var input inputError
	if stdin != nil {
		go func() {
			in := &errReader{r: c.stdin}
			_, _ = io.Copy(stdin, in)
			if in.err != nil {
				input.set(in.err)
				stop()
			}
			_ = stdin.Close()
		}()
	}
	er := &eofReader{r: stdout}
	cerr := consume(er)
	stoppedEarly := !er.eof
	if stoppedEarly {
		stop() // git may be blocked writing to a pipe nobody reads
	}
	werr := cmd.Wait()

	code := 0
	var exitErr *exec.ExitError
	if errors.As(werr, &exitErr) {
		code = exitErr.ExitCode()
	} else if werr != nil {
		code = -1
	}
	g.logger.LogAttrs(ctx, slog.LevelDebug, "git",
		slog.Any("args", c.args), slog.String("dir", c.dir),
		slog.Int("exit_code", code), slog.Bool("stopped", stoppedEarly),
		slog.Duration("duration", time.Since(start)))

	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("git %s: %w", firstArg(c.args), ctxErr)
	}
	if ierr := input.get(); ierr != nil {
		return fmt.Errorf("git %s: its input: %w", firstArg(c.args), ierr)
	}
	if cerr != nil && !errors.Is(cerr, errStopped) {
		return cerr
	}
	if stoppedEarly {
		return nil // we stopped git: its exit status says nothing
	}
	if werr == nil {
		return nil
	}
	if exitErr == nil {
		return fmt.Errorf("git %s: %w", firstArg(c.args), werr)
	}
	if g.limits.hitCPU(cmd.ProcessState) {
		return fmt.Errorf("%w: git %s used more than patina's limit of %s of CPU time", ErrTooLarge, firstArg(c.args), g.limits.cpu)
	}
	ge := &GitError{
		Args:     slices.Clone(c.args),
		Dir:      c.dir,
		ExitCode: code,
		Stderr:   stderr.String(),
		kind:     classify(stderr.String()),
	}
	if g.limits.memory > 0 && errors.Is(ge.kind, errOutOfMemory) {
		return fmt.Errorf("%w: git %s needed more memory than patina's limit of %s: %w", ErrTooLarge, firstArg(c.args), formatBytes(g.limits.memory), ge)
	}
	return ge
}

// inputError is the error reading a command's standard input, set by the
// goroutine copying it.
type inputError struct {
	mu  sync.Mutex
	err error
}

func (e *inputError) set(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.err = err
}

func (e *inputError) get() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// errReader remembers the first error other than EOF of its reader.
type errReader struct {
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF && e.err == nil {
		e.err = err
	}
	return n, err
}

// eofReader notes whether its reader reached the end.
type eofReader struct {
	r   io.Reader
	eof bool
}

func (e *eofReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		e.eof = true
	}
	return n, err
}

// capBuffer keeps the first max bytes written to it and discards the rest,
// never failing a write (so git is never blocked on its standard error).
type capBuffer struct {
	max       int
	b         bytes.Buffer
	truncated bool
}

func (c *capBuffer) Write(p []byte) (int, error) {
	if room := c.max - c.b.Len(); room < len(p) {
		c.truncated = true
		if room > 0 {
			c.b.Write(p[:room])
		}
		return len(p), nil
	}
	return c.b.Write(p)
}

func (c *capBuffer) String() string {
	if c.truncated {
		return c.b.String() + "…"
	}
	return c.b.String()
}

// out runs git in dir and returns its standard output without the trailing
// newline.
func (g *runner) out(ctx context.Context, dir string, args ...string) (string, error) {
	b, err := g.run(ctx, gitCmd{dir: dir, args: args})
	return strings.TrimRight(string(b), "\n"), err
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
	case has("pack exceeds maximum allowed size"):
		return ErrTooLarge
	case has("Out of memory"), has("Cannot allocate memory"), has("out of memory"):
		return errOutOfMemory
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
