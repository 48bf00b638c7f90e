package worktree

import (
	"encoding/json"
	"log/slog"
	"time"
)

// Config configures Open. Zero fields get the defaults described on each.
type Config struct {
	// StateDir is patina's state directory; worktrees live under
	// <StateDir>/worktrees/<repo-key>/<name>. It must not lie inside the
	// user's working tree. Default: $XDG_STATE_HOME/patina, else
	// ~/.local/state/patina.
	StateDir string
	// Author signs patina's own commits (initial commits, notes, merge
	// commits) as author and committer, and Commit's commits unless the
	// request names another author. Default: patina <patina@localhost>.
	Author Signature
	// Logger receives debug lines for every git call and info lines for
	// every change. Default: discard.
	Logger *slog.Logger
	// GitPath is the git binary (≥ 2.38). Default: "git" from $PATH.
	GitPath string
}

// Signature is a git identity.
type Signature struct {
	Name  string `json:"name"`
	Email string `json:"email"`
}

// DefaultAuthor is the identity used when Config.Author is empty.
var DefaultAuthor = Signature{Name: "patina", Email: "patina@localhost"}

// Workspace is one workspace as recorded in the repository's notes, joined
// with what git knows now about its branch and worktree.
type Workspace struct {
	ID           string          `json:"id"`             // uuid, fixed at creation
	Name         string          `json:"name"`           // validated by ValidateName
	Branch       string          `json:"branch"`         // "patina/<name>" (short branch name)
	Path         string          `json:"path"`           // the worktree directory
	Repo         string          `json:"repo"`           // top level of the user's main working tree
	GitCommonDir string          `json:"git_common_dir"` // absolute path of the repository's common git dir
	GitDir       string          `json:"git_dir"`        // the worktree's own git dir (<common>/worktrees/...); "" while Missing
	BaseRef      string          `json:"base_ref"`       // full ref the workspace started from ("refs/heads/main"); "" for a detached HEAD or a bare commit
	BaseCommit   string          `json:"base_commit"`    // commit the workspace started from
	Commit       string          `json:"commit"`         // the workspace's initial empty commit; its notes hold the state
	Head         string          `json:"head"`           // current tip of Branch; "" if the branch was deleted behind patina's back
	CreatedAt    time.Time       `json:"created_at"`
	Image        string          `json:"image,omitempty"`
	Meta         json.RawMessage `json:"meta,omitempty"` // opaque JSON owned by the sidecar
	Missing      bool            `json:"missing"`        // the worktree directory has vanished; see Repo.Repair
}

// CreateRequest describes a new workspace.
type CreateRequest struct {
	// Name of the workspace; empty generates a short uuid-based one.
	Name string
	// Base is the revision to start from (branch, tag, commit...); empty
	// means the main working tree's current HEAD.
	Base string
	// Image is recorded in the state note for the sidecar.
	Image string
	// Meta is opaque JSON recorded in the state note (must be valid JSON).
	Meta json.RawMessage
}

// Event kinds patina itself logs. AppendLog accepts any kind matching
// [a-z][a-z0-9_-]* (at most 32 bytes).
const (
	EventCreated   = "created"
	EventCommand   = "command"
	EventCommitted = "committed"
	EventMerged    = "merged"
	EventApplied   = "applied"
	EventRepaired  = "repaired"
	EventDeleted   = "deleted"
)

// Event is one line of a workspace's log note.
type Event struct {
	Time     time.Time `json:"time"`                // zero: now (AppendLog)
	Kind     string    `json:"kind"`                // EventCommand, ...
	ExitCode *int      `json:"exit_code,omitempty"` // for commands
	Message  string    `json:"message,omitempty"`   // one line; newlines and control characters become spaces
}

// FileStatus says how a file changed.
type FileStatus string

// File statuses of a FileStat.
const (
	StatusAdded       FileStatus = "added"
	StatusModified    FileStatus = "modified"
	StatusDeleted     FileStatus = "deleted"
	StatusRenamed     FileStatus = "renamed"
	StatusCopied      FileStatus = "copied"
	StatusTypeChanged FileStatus = "type-changed"
)

// FileStat summarises the change to one file.
type FileStat struct {
	Path    string     `json:"path"`
	OldPath string     `json:"old_path,omitempty"` // for renames and copies
	Status  FileStatus `json:"status"`
	Added   int        `json:"added"`   // lines; 0 for binary files
	Deleted int        `json:"deleted"` // lines; 0 for binary files
	Binary  bool       `json:"binary"`
}

// Diff is a workspace's change against its base commit.
type Diff struct {
	Base  string     `json:"base"`  // the commit diffed against: the base commit, or the merge base with the base ref once they share later history
	Tree  string     `json:"tree"`  // tree of the workspace as diffed (committed + uncommitted + untracked)
	Text  string     `json:"text"`  // unified diff, "a/" and "b/" prefixes, renames detected; binary files as "Binary files ... differ"
	Files []FileStat `json:"files"` // sorted by path
}

// CommitRequest describes Repo.Commit.
type CommitRequest struct {
	// Message of the commit; empty means "patina: changes in workspace <name>".
	Message string
	// Author overrides Config.Author as the commit's author (the committer
	// stays Config.Author).
	Author *Signature
}

// CommitResult is what Repo.Commit did.
type CommitResult struct {
	Commit    string `json:"commit"`    // the branch tip afterwards
	Committed bool   `json:"committed"` // false: nothing to commit, Commit is the unchanged tip
}

// MergeRequest describes Repo.Merge.
type MergeRequest struct {
	// Into is the local branch to merge into ("main" or "refs/heads/main");
	// empty means the branch the workspace was created from.
	Into string
	// Message of the merge commit, if one is made; empty means
	// "Merge patina workspace '<name>' into <branch>".
	Message string
	// NoFastForward makes a merge commit even when a fast-forward is possible.
	NoFastForward bool
}

// MergeResult is what Repo.Merge did.
type MergeResult struct {
	Into        string `json:"into"`     // full ref merged into
	Previous    string `json:"previous"` // its tip before
	Commit      string `json:"commit"`   // its tip after (== Previous when UpToDate)
	FastForward bool   `json:"fast_forward"`
	UpToDate    bool   `json:"up_to_date"`  // nothing to merge: no commits beyond the initial one, or all already in Into
	Uncommitted bool   `json:"uncommitted"` // the workspace has uncommitted changes, which a merge never includes
}

// ApplyRequest describes Repo.Apply.
type ApplyRequest struct {
	// CommittedOnly applies only the branch's commits; by default Apply
	// applies what Diff shows (committed, uncommitted and untracked work).
	CommittedOnly bool
}

// ApplyResult is what Repo.Apply did.
type ApplyResult struct {
	Dir   string     `json:"dir"`   // the working tree the change was staged in
	Tree  string     `json:"tree"`  // the index's tree afterwards (HEAD plus the change)
	Files []FileStat `json:"files"` // what was staged; empty when there was nothing to apply
}

// DeleteRequest describes Repo.Delete.
type DeleteRequest struct {
	// KeepBranch keeps the branch (with its commits) and the log note; the
	// worktree and the state note are removed either way, so the workspace no
	// longer lists.
	KeepBranch bool
}
