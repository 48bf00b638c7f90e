package worktree

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Every error this package returns for one of these
// conditions wraps the sentinel, so callers test with errors.Is.
var (
	// ErrNotFound: no git repository at the path, no such workspace, or a
	// revision or branch that does not exist.
	ErrNotFound = errors.New("worktree: not found")
	// ErrExists: a workspace, branch or directory with that name already exists.
	ErrExists = errors.New("worktree: already exists")
	// ErrInvalidName: a name, revision, object id, branch or event kind was
	// refused before git saw it. The error is a *NameError naming the rule
	// that failed.
	ErrInvalidName = errors.New("worktree: invalid name")
	// ErrConflict: a merge or apply would conflict, or the branch to delete
	// is checked out. Nothing was changed. A *FilesError lists conflicting
	// files.
	ErrConflict = errors.New("worktree: conflict")
	// ErrNotOnBranch: Merge was asked for a commit that the workspace's
	// branch does not have (neither its recorded tip nor an ancestor of it
	// since the base commit). Nothing was changed.
	ErrNotOnBranch = errors.New("worktree: not on the workspace's branch")
	// ErrAmbiguous: an abbreviated commit id matches several commits
	// (ResolveCommit). The error is an *AmbiguousError listing them.
	ErrAmbiguous = errors.New("worktree: ambiguous commit id")
	// ErrDirty: the target working tree has uncommitted changes (or an
	// unfinished merge, rebase or cherry-pick) that the operation would touch.
	// Nothing was changed. A *FilesError lists the files.
	ErrDirty = errors.New("worktree: uncommitted changes in the way")
	// ErrNoTarget: Merge was given no target and the workspace was not
	// created from a local branch (detached HEAD, tag, commit or remote
	// branch), so there is no default; set MergeRequest.Into.
	ErrNoTarget = errors.New("worktree: no merge target")
	// ErrUnsupported: a bare repository, a repository without commits, a
	// state directory inside the repository's working tree, or a git older
	// than 2.38.
	ErrUnsupported = errors.New("worktree: unsupported")
	// ErrRejected: objects a workspace sent (through a Source) were refused:
	// not a pack, a truncated or corrupt one, objects failing git's fsck
	// checks, objects missing, or a head that is not a commit. Nothing was
	// written to the user's repository.
	ErrRejected = errors.New("worktree: objects rejected")
	// ErrTooLarge: a pack over Config.MaxPackBytes, an object (or a delta's
	// result) over Config.MaxSingleObjectBytes, objects inflating to more
	// than Config.MaxObjectBytes, a host git over Config.GitMemoryBytes or
	// Config.GitCPUTime, or git output over an internal bound. The message
	// names the limit. Nothing was written to the user's repository.
	ErrTooLarge = errors.New("worktree: too large")
)

// GitError is a git command that ran and failed. It unwraps to a sentinel
// when git's message says which one (see classify in git.go), so
// errors.Is(err, ErrNotFound) also works on git failures.
type GitError struct {
	Args     []string // arguments after "git" and patina's fixed -c options
	Dir      string   // working directory of the command
	ExitCode int      // git's exit status; -1 when it was killed
	Stderr   string   // everything git wrote to standard error
	kind     error
}

func (e *GitError) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if len(msg) > 1024 {
		msg = msg[:1024] + "…"
	}
	if msg == "" {
		msg = "(no output)"
	}
	return fmt.Sprintf("git %s: exit status %d: %s", strings.Join(e.Args, " "), e.ExitCode, msg)
}

// Unwrap returns the sentinel git's message maps to, or nil.
func (e *GitError) Unwrap() error { return e.kind }

// NameError is a name refused by validation. It unwraps to ErrInvalidName.
type NameError struct {
	What string // "workspace name", "branch", "revision", "object id", "event kind", "author"
	Name string // the refused value
	Rule string // the rule it broke, e.g. "starts with '-'"
}

func (e *NameError) Error() string {
	return fmt.Sprintf("worktree: invalid %s %q: %s", e.What, e.Name, e.Rule)
}

// Unwrap returns ErrInvalidName.
func (e *NameError) Unwrap() error { return ErrInvalidName }

// FilesError is a refusal that concerns particular files: the conflicting
// files of a merge or apply (Kind ErrConflict) or the uncommitted files in the
// way (Kind ErrDirty). It unwraps to Kind.
type FilesError struct {
	Kind   error    // ErrConflict or ErrDirty
	Op     string   // what was refused, e.g. "merge patina/x into refs/heads/main"
	Dir    string   // the working tree concerned, if any
	Files  []string // repository-relative paths, sorted
	Detail string   // extra explanation, may be empty
}

func (e *FilesError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %v", e.Op, e.Kind)
	if e.Dir != "" {
		fmt.Fprintf(&b, " in %s", e.Dir)
	}
	if len(e.Files) > 0 {
		const show = 20
		files := e.Files
		more := ""
		if len(files) > show {
			more = fmt.Sprintf(" and %d more", len(files)-show)
			files = files[:show]
		}
		fmt.Fprintf(&b, ": %s%s", strings.Join(files, ", "), more)
	}
	if e.Detail != "" {
		fmt.Fprintf(&b, "; %s", e.Detail)
	}
	return b.String()
}

// Unwrap returns Kind.
func (e *FilesError) Unwrap() error { return e.Kind }

// AmbiguousError is an abbreviated commit id that several commits of the
// repository start with. It unwraps to ErrAmbiguous.
type AmbiguousError struct {
	Prefix  string   // the id as given
	Commits []string // the commits it matches, sorted
}

func (e *AmbiguousError) Error() string {
	const show = 5
	cs := e.Commits
	more := ""
	if len(cs) > show {
		more = fmt.Sprintf(" and %d more", len(cs)-show)
		cs = cs[:show]
	}
	return fmt.Sprintf("commit id %s is ambiguous: %d commits start with it (%s%s); give more of it", e.Prefix, len(e.Commits), strings.Join(cs, ", "), more)
}

// Unwrap returns ErrAmbiguous.
func (e *AmbiguousError) Unwrap() error { return ErrAmbiguous }
