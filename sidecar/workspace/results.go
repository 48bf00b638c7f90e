package workspace

import (
	"io"
	"io/fs"
	"time"
)

// The domain's values: what the Manager returns and takes for sessions,
// commands, files and git. They have the fields and meaning of what the
// agent (session's values, its protocol's) and package worktree answer,
// but are the domain's own: each is made once, where those answers come
// in (convert.go), so that an adapter of the domain (the HTTP API) needs
// no package the domain drives.

// MaxTerminalSize is the most rows, and the most columns, a terminal may
// have (a size the agent's terminals accept).
const MaxTerminalSize = maxTerminalSize

// SessionState is where a session is in its life: "idle", "running",
// "ended" (its shell ended) or "closed".
type SessionState string

// SessionInfo describes a session.
type SessionInfo struct {
	ID        string
	State     SessionState
	Cwd       string
	CreatedAt time.Time
	// Running is the id of the running command, if any.
	Running string
	// Commands counts the commands run so far.
	Commands int
	// ExitCode is the shell's exit status once ended (-1: unknown).
	ExitCode *int
	// EndReason says how the session ended.
	EndReason string
	// Replacements counts shells replaced after a wedge.
	Replacements int
	// Terminal: the session is lent to a terminal; commands get ErrBusy
	// until it ends.
	Terminal bool
}

// CreateSessionRequest creates a session.
type CreateSessionRequest struct {
	// ID names it (empty: the agent picks one).
	ID string
	// Cwd is its first working directory (empty: /workspace).
	Cwd string
	// Env is exported in it.
	Env map[string]string
}

// CommandState is where a command is in its life: "running", "finished",
// or "lost" (the session's shell vanished before the command reported
// its status).
type CommandState string

// CommandInfo is a command's history record.
type CommandInfo struct {
	ID          string
	Command     string
	State       CommandState
	StartedAt   time.Time
	EndedAt     *time.Time
	ExitCode    *int
	StdoutBytes int64
	StderrBytes int64
	TimedOut    bool
	Interrupted bool
	// Ended: the shell ended during the command.
	Ended bool
	// Replaced: the shell was replaced after the command would not stop.
	Replaced bool
	// OutputPruned: the command's output files were deleted (the session
	// keeps the latest commands' only).
	OutputPruned bool
}

// TTY is a terminal's size, and its type.
type TTY struct {
	Rows, Cols int
	// Term is TERM for the command (empty: the session's own).
	Term string
}

// ExecOutput is one captured stream of a command's result.
type ExecOutput struct {
	// Data is the whole output, or its first Config.OutputLimit bytes
	// when Truncated.
	Data []byte
	// Tail is the last Config.OutputLimit bytes when Truncated, else nil.
	Tail []byte
	// Size is the stream's total size in bytes.
	Size int64
	// Truncated says Data and Tail do not hold all of it; Output reads
	// the rest.
	Truncated bool
}

// FileInfo describes a file or a directory's entry in a workspace.
type FileInfo struct {
	Name string
	// Type is file, dir, symlink or other.
	Type    string
	Size    int64
	Mode    fs.FileMode
	ModTime time.Time
}

// File is a regular file of a workspace being read: its bytes, and what
// it is. The reader closes it.
type File struct {
	io.ReadCloser
	Info FileInfo
}

// FileWriteResult says what a write did.
type FileWriteResult struct {
	Size int64
	// Created: there was no file at that path before.
	Created bool
}

// OutputStream is a command's stdout or stderr being read. The reader
// closes it.
type OutputStream struct {
	io.ReadCloser
	// Size is the stream's size when the command had finished (else -1).
	Size int64
}

// Signature is a git identity.
type Signature struct {
	Name, Email string
}

// FileStatus says how a file changed: "added", "modified", "deleted",
// "renamed", "copied" or "type-changed".
type FileStatus string

// FileStat summarises the change to one file.
type FileStat struct {
	Path string
	// OldPath is the path it had, for renames and copies.
	OldPath string
	Status  FileStatus
	// Added and Deleted count lines; 0 for binary files.
	Added, Deleted int
	Binary         bool
}

// DiffResult is a workspace's change against its base, and what was
// repaired to make it.
type DiffResult struct {
	// Base is the commit diffed against: the base commit, or the merge
	// base with the base ref once they share later history.
	Base string
	// Commit is the workspace's HEAD the diff is of: a merge that names
	// it merges exactly it.
	Commit string
	// Tree is the tree of everything in the workspace, diffed.
	Tree string
	// Text is the unified diff (renames detected, binary files as
	// "Binary files ... differ"); Truncated: it stopped at
	// Config.DiffLimit.
	Text      string
	Truncated bool
	// Files are the files changed, by path; FilesTruncated: there were
	// more.
	Files          []FileStat
	FilesTruncated bool
	// Uncommitted: the workspace has work not committed yet, which a
	// merge does not take.
	Uncommitted bool
	// Repaired says the workspace's repository was broken and re-seeded
	// at the base commit (repair.go); "" when it was sound.
	Repaired string
}

// MergeResult says what a merge did.
type MergeResult struct {
	// Into is the full ref merged into; Previous its tip before, Commit
	// its tip after (Previous when UpToDate).
	Into, Previous, Commit string
	// Merged is the workspace's commit merged.
	Merged      string
	FastForward bool
	// UpToDate: there was nothing to merge.
	UpToDate bool
	// Uncommitted: the workspace has work not committed, left out.
	Uncommitted bool
}

// ApplyResult says what Apply staged.
type ApplyResult struct {
	// Dir is the working tree the change was staged in.
	Dir string
	// Tree is the index's tree afterwards (HEAD plus the change).
	Tree string
	// Files is what was staged; empty when there was nothing to apply.
	Files []FileStat
}

// LogEntry is one event of a workspace's log.
type LogEntry struct {
	Time time.Time
	// Kind is what happened: command, committed, merged, ...
	Kind string
	// ExitCode is a command's.
	ExitCode *int
	// Message is one line.
	Message string
	// Line is the event as its log shows it:
	// "2025-11-21T05:00:00Z command (exit 0): go test ./...".
	Line string
}
