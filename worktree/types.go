package worktree

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"time"
)

// Config configures Open. Zero fields get the defaults described on each.
type Config struct {
	// StateDir is patina's state directory. This package creates nothing
	// there any more; it is where legacy (format 1) workspaces had their
	// worktrees, <StateDir>/worktrees/<repo-key>/<name> (Workspace.LegacyPath),
	// and Open still refuses one inside the user's working tree. Default:
	// $XDG_STATE_HOME/patina, else ~/.local/state/patina.
	StateDir string
	// Author signs patina's own commits (merge commits) and notes as author
	// and committer. Default: patina <patina@localhost>.
	Author Signature
	// Logger receives debug lines for every git call and info lines for
	// every change. Default: discard.
	Logger *slog.Logger
	// GitPath is the git binary (≥ 2.38). Default: "git" from $PATH.
	GitPath string
	// MaxPackBytes bounds the pack a Source sends for one Record, Diff or
	// Apply (git index-pack --max-input-size). Default: 2 GiB.
	MaxPackBytes int64
	// MaxObjectBytes bounds the total inflated size of the objects one pack
	// brings (a small pack can inflate to a huge blob, which Apply and Merge
	// would write into the user's working tree), as the pack declares it,
	// a delta counting the size of its result and of its own data.
	// Default: 4 × MaxPackBytes.
	MaxObjectBytes int64
	// MaxSingleObjectBytes bounds the inflated size of any one object a
	// pack brings, as declared, or made by a delta. git holds an object
	// whole in memory to index, diff or merge it, so this and GitMemoryBytes
	// go together. Default: 512 MiB (no more than MaxObjectBytes).
	MaxSingleObjectBytes int64
	// GitMemoryBytes bounds the memory every git process run on the host
	// may allocate (RLIMIT_DATA: the heap, not the packs git maps
	// read-only, so the repository's size does not count). A git over it
	// fails and the operation with ErrTooLarge. Default: 4 GiB; negative:
	// no bound. Linux only.
	GitMemoryBytes int64
	// GitCPUTime bounds the CPU time of every git process run on the host
	// (RLIMIT_CPU, whole seconds). Default: 10 minutes; negative: no
	// bound. Linux only.
	GitCPUTime time.Duration
}

// Signature is a git identity.
type Signature struct {
	Name  string `json:"name"`
	Email string `json:"email"`
}

// DefaultAuthor is the identity used when Config.Author (or Inside.Author)
// is empty.
var DefaultAuthor = Signature{Name: "patina", Email: "patina@localhost"}

// Workspace formats.
const (
	// FormatLegacy: a git worktree of the user's repository with its notes on
	// an empty "patina: start workspace" commit (patina before issue 10).
	// Such a workspace lists, and Migrate converts it.
	FormatLegacy = 1
	// FormatCurrent: a repository of its own inside the container; notes on
	// an anchor blob; branch created at the base commit.
	FormatCurrent = 2
)

// Workspace is one workspace as recorded in the repository's notes, joined
// with what git knows now about its branch. Everything but ID, Name (both
// validated), Branch (derived from Name) and the paths derived from the
// Repo is what a note says: outside input for the caller to check against
// its own records, never a path or mount.
type Workspace struct {
	ID           string `json:"id"`             // uuid, fixed at creation
	Name         string `json:"name"`           // validated by ValidateName
	Branch       string `json:"branch"`         // "patina/<name>" (short branch name)
	Repo         string `json:"repo"`           // top level of the user's main working tree
	GitCommonDir string `json:"git_common_dir"` // absolute path of the repository's common git dir
	// ObjectDirs are the repository's object directories: <common>/objects
	// first, then the repository's own alternates (recursively) that
	// exist. Absolute, symlinks resolved. Derived from the repository, not
	// from a note. They hold every branch and everything patina took from
	// any workspace: the sidecar no longer mounts them in a workspace
	// (WriteCommitPack makes what it mounts).
	ObjectDirs []string `json:"object_dirs"`
	BaseRef    string   `json:"base_ref"`    // full ref the workspace started from ("refs/heads/main"); "" for a detached HEAD or a bare commit
	BaseCommit string   `json:"base_commit"` // commit the workspace started from; its branch started there
	// Anchor is the object the workspace's notes annotate: a blob
	// "patina workspace <id>\n" of its own (format 2), or the empty start
	// commit of a legacy workspace.
	Anchor    string          `json:"anchor"`
	Head      string          `json:"head"` // current tip of Branch, as last recorded; "" if the branch was deleted behind patina's back
	CreatedAt time.Time       `json:"created_at"`
	Image     string          `json:"image,omitempty"`
	Meta      json.RawMessage `json:"meta,omitempty"` // opaque JSON owned by the sidecar
	Format    int             `json:"format"`         // FormatCurrent or FormatLegacy
	Legacy    bool            `json:"legacy"`         // Format == FormatLegacy: Migrate it
	// LegacyPath is, for a legacy workspace only, where its worktree lives
	// if it was made with this Config.StateDir:
	// <StateDir>/worktrees/<repo-key>/<name>. Derived from the Config and
	// the validated name, never from a note or from git's worktree files.
	LegacyPath string `json:"legacy_path,omitempty"`
}

// CreateRequest describes a new workspace.
type CreateRequest struct {
	// Name of the workspace; empty generates a short uuid-based one.
	Name string
	// ID is the workspace's id, a uuid no workspace of the repository has;
	// empty generates one (the sidecar gives one when the workspace's
	// container was made before its repository: the warm pool).
	ID string
	// Base is the revision to start from (branch, tag, commit...); empty
	// means the main working tree's current HEAD.
	Base string
	// Target is the branch (a full refs/heads/ ref) merges go into by
	// default when Base is not a branch: a fork starts at its source's
	// commit and keeps its source's merge target. Ignored when Base names
	// a branch.
	Target string
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
	EventCommitted = "committed" // logged by the sidecar after Inside.Commit
	EventRecorded  = "recorded"
	EventMerged    = "merged"
	EventApplied   = "applied"
	EventMigrated  = "migrated"
	EventDeleted   = "deleted"
)

// Event is one line of a workspace's log note.
type Event struct {
	Time     time.Time `json:"time"`                // zero: now (AppendLog)
	Kind     string    `json:"kind"`                // EventCommand, ...
	ExitCode *int      `json:"exit_code,omitempty"` // for commands
	Message  string    `json:"message,omitempty"`   // one line; newlines and control characters become spaces
}

// Source is where a workspace's objects come from: the sidecar implements
// it over the workspace's agent, which runs Inside.Pack in the container.
// Everything it returns is untrusted.
type Source interface {
	// Pack returns a pack stream (git pack-objects --stdout --revs --thin)
	// of the objects reachable from want and not from have. The caller
	// closes the reader; closing it must unblock a pending Read. Pack and
	// reads from the stream should honour ctx; Record, Diff and Apply stop
	// waiting when ctx is done either way.
	Pack(ctx context.Context, want, have []string) (io.ReadCloser, error)
}

// RecordRequest describes Repo.Record.
type RecordRequest struct {
	// Head is the commit the workspace's branch moves to: the workspace's
	// HEAD (Inside.State). A full hex object id.
	Head string
	// Source provides Head's objects the repository does not have yet; it
	// may be nil when it has them all.
	Source Source
}

// RecordResult is what Repo.Record did.
type RecordResult struct {
	Previous string `json:"previous"` // the branch tip before ("" if the branch had been deleted)
	Head     string `json:"head"`     // the branch tip now
	Moved    bool   `json:"moved"`
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

// Diff limits used when DiffRequest leaves them zero.
const (
	DefaultMaxDiffText  = 4 << 20
	DefaultMaxDiffFiles = 10000
)

// DiffRequest describes Repo.Diff.
type DiffRequest struct {
	// Head is the workspace's HEAD commit; empty means the branch tip as
	// last recorded.
	Head string
	// Snapshot is a commit of everything in the workspace (Inside.State:
	// HEAD plus uncommitted and untracked work; its parent is Head); empty
	// means Head (committed work only).
	Snapshot string
	// Source provides the objects of Head and Snapshot the repository does
	// not have; nil when it has them.
	Source Source
	// MaxText bounds Diff.Text in bytes (DefaultMaxDiffText if 0); git is
	// stopped there and Diff.Truncated set.
	MaxText int
	// MaxFiles bounds Diff.Files (DefaultMaxDiffFiles if 0); beyond it
	// Diff.FilesTruncated is set.
	MaxFiles int
}

// Diff is a workspace's change against its base.
type Diff struct {
	Base           string     `json:"base"`            // the commit diffed against: the base commit, or the merge base with the base ref once they share later history
	Commit         string     `json:"commit"`          // the Head the diff is of: once recorded, MergeRequest.Commit merges exactly it
	Tree           string     `json:"tree"`            // tree of the Snapshot diffed
	Text           string     `json:"text"`            // unified diff, "a/" and "b/" prefixes, renames detected; binary files as "Binary files ... differ"
	Truncated      bool       `json:"truncated"`       // Text stopped at MaxText
	Files          []FileStat `json:"files"`           // sorted by path
	FilesTruncated bool       `json:"files_truncated"` // more than MaxFiles files changed; Files holds the first MaxFiles
	Uncommitted    bool       `json:"uncommitted"`     // the Snapshot's tree differs from Head's: work not committed yet, which Merge does not take
}

// MergeRequest describes Repo.Merge.
type MergeRequest struct {
	// Into is the local branch to merge into ("main" or "refs/heads/main");
	// empty means the branch the workspace was created from.
	Into string
	// Commit, if set, is the commit to merge (a full object id; see
	// ResolveCommit for abbreviated ones): the branch's recorded tip or an
	// ancestor of it that descends from the base commit, so that exactly
	// what the caller reviewed (Diff.Commit) is merged, and nothing the
	// workspace recorded since. Another commit is ErrNotOnBranch. Empty
	// means the recorded tip.
	Commit string
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
	Merged      string `json:"merged"`   // the workspace's commit merged: MergeRequest.Commit, else the recorded tip
	FastForward bool   `json:"fast_forward"`
	UpToDate    bool   `json:"up_to_date"` // nothing to merge: no commits beyond the base, or all already in Into
}

// ApplyRequest describes Repo.Apply.
type ApplyRequest struct {
	// Snapshot is the commit whose change is applied (Inside.State's
	// Snapshot, as for Diff). Empty, or CommittedOnly, applies the branch
	// tip as last recorded.
	Snapshot string
	// Source provides the Snapshot's objects; nil when the repository has
	// them.
	Source Source
	// CommittedOnly applies only the recorded branch's commits.
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
	// state note is removed either way, so the workspace no longer lists.
	KeepBranch bool
}

// CommitRequest describes Inside.Commit.
type CommitRequest struct {
	// Message of the commit; empty means "patina: changes in the workspace".
	Message string
	// Author overrides Inside.Author as the commit's author (the committer
	// stays Inside.Author).
	Author *Signature
}

// CommitResult is what Inside.Commit did.
type CommitResult struct {
	Commit    string `json:"commit"`    // HEAD afterwards
	Committed bool   `json:"committed"` // false: nothing to commit, Commit is the unchanged HEAD
}

// InitRequest describes Inside.Init.
type InitRequest struct {
	// Reseed makes a repository whose HEAD names no readable commit
	// (its branch deleted, its objects removed or pruned, .git removed) a
	// new one at Base, keeping the files (as KeepFiles), so that their
	// changes show against Base again. A sound repository is left alone.
	Reseed bool
	// Branch is the short name of the workspace's branch ("patina/<name>").
	Branch string
	// Base is the commit the branch starts at: Workspace.BaseCommit for a
	// new workspace, Workspace.Head for a migrated one. Full hex object id.
	Base string
	// Alternates are the object directories, as seen where Init runs, that
	// the repository borrows objects from (the user's, mounted read-only).
	Alternates []string
	// KeepFiles keeps the files already in the directory (a legacy worktree
	// being migrated; its .git file is replaced): the index is set to Base
	// (reset --mixed), so the work shows as uncommitted changes.
	KeepFiles bool
	// Identity, if set, is written to the repository's config as user.name
	// and user.email, so `git commit` works for the agent.
	Identity *Signature
	// Rename, on a repository that is already complete (a fork's copy of
	// another workspace's), renames the branch HEAD is on to Branch.
	Rename bool
}

// InitResult is what Inside.Init did.
type InitResult struct {
	Created bool   `json:"created"` // false: the repository was already there and was left as it was (alternates rewritten)
	Head    string `json:"head"`
}

// State is a workspace's git state as seen inside (Inside.State).
type State struct {
	Head     string `json:"head"`     // HEAD commit
	Branch   string `json:"branch"`   // short branch name HEAD is on; "" when detached
	Snapshot string `json:"snapshot"` // commit of HEAD plus uncommitted and untracked work (parent HEAD); == Head when clean
	Dirty    bool   `json:"dirty"`    // Snapshot != Head
}
