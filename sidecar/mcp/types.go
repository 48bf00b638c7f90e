package mcpserver

// The tools' arguments and structured results. The jsonschema tags are the
// descriptions a model reads; fields without omitempty are required.

// WorkspaceCreateIn is workspace_create's arguments.
type WorkspaceCreateIn struct {
	Name         string            `json:"name,omitempty" jsonschema:"Name of the workspace, also naming its branch patina/<name>: 1 to 64 ASCII letters, digits, '.', '_' and '-', starting with a letter or digit. Generated when omitted."`
	Repo         string            `json:"repo,omitempty" jsonschema:"Path of a git repository on the user's machine (a relative path is resolved against the MCP server's working directory, normally the user's project). The workspace becomes a new branch of it checked out at /workspace. Omit for an empty scratch workspace without git."`
	Base         string            `json:"base,omitempty" jsonschema:"Git ref (branch, tag or commit) the workspace's branch starts from (default: the repository's current HEAD). Only with repo."`
	Image        string            `json:"image,omitempty" jsonschema:"Docker image of the workspace's container (default patina/base:bookworm: a minimal Debian 12 with bash, coreutils, git, procps, vim-tiny and less; install more with apt-get install -y)."`
	Env          map[string]string `json:"env,omitempty" jsonschema:"Environment variables of every session, e.g. {\"CI\": \"1\"}."`
	MemoryMB     int64             `json:"memory_mb,omitempty" jsonschema:"Memory limit of the container in MiB (default: the sidecar's)."`
	CPUs         float64           `json:"cpus,omitempty" jsonschema:"CPU limit, in CPUs (e.g. 1.5; default: the sidecar's)."`
	PidsLimit    int64             `json:"pids_limit,omitempty" jsonschema:"Most processes at once (default: the sidecar's)."`
	IdleStop     string            `json:"idle_stop,omitempty" jsonschema:"Stop the workspace after this long without use, e.g. 30m (it starts again on the next call); 0 never (default: the sidecar's)."`
	NetworkNone  bool              `json:"network_none,omitempty" jsonschema:"No network at all."`
	NetworkAllow []string          `json:"network_allow,omitempty" jsonschema:"Reach only these host names, addresses or CIDRs (host or host:port); default: the internet but nothing private."`
	Placement    []string          `json:"placement,omitempty" jsonschema:"Swarm placement constraints choosing the node the workspace runs on, e.g. [\"node.labels.gpu==1\"] (node.ATTR==VALUE or node.ATTR!=VALUE). Only when the sidecar runs with --engine swarm; omit otherwise."`
}

// WorkspaceOut describes a workspace.
type WorkspaceOut struct {
	ID     string `json:"id" jsonschema:"The workspace's id."`
	Name   string `json:"name" jsonschema:"The workspace's name; the other tools take it as workspace."`
	Status string `json:"status" jsonschema:"running or stopped."`
	Error  string `json:"error,omitempty" jsonschema:"Why the workspace stopped, when nobody stopped it."`
	Image  string `json:"image" jsonschema:"The container's image."`
	Branch string `json:"branch,omitempty" jsonschema:"The workspace's git branch (repository workspaces only)."`
	Repo   string `json:"repo,omitempty" jsonschema:"The repository the workspace branches from."`
	Base   string `json:"base,omitempty" jsonschema:"The ref the branch started from."`
	// Worktree is on the sidecar's machine; the container sees it at
	// /workspace.
	Worktree string `json:"worktree" jsonschema:"The workspace's directory on the user's machine, mounted at /workspace in the container."`
}

// WorkspaceListIn is workspace_list's (no) arguments.
type WorkspaceListIn struct{}

// WorkspaceListOut is workspace_list's result.
type WorkspaceListOut struct {
	Workspaces []WorkspaceOut `json:"workspaces" jsonschema:"The workspaces, oldest first."`
}

// WorkspaceDeleteIn is workspace_delete's arguments.
type WorkspaceDeleteIn struct {
	Workspace  string `json:"workspace,omitempty" jsonschema:"The workspace's name or id."`
	ID         string `json:"id,omitempty" jsonschema:"The old name of workspace, still accepted."`
	KeepBranch bool   `json:"keep_branch,omitempty" jsonschema:"Keep the workspace's git branch (and its commits) in the repository. Default false: the branch is deleted too."`
}

// WorkspaceDeleteOut is workspace_delete's result.
type WorkspaceDeleteOut struct {
	Deleted    string `json:"deleted" jsonschema:"The workspace deleted."`
	KeptBranch bool   `json:"kept_branch" jsonschema:"Whether its branch was kept."`
}

// RunIn is run's arguments.
type RunIn struct {
	Workspace  string `json:"workspace" jsonschema:"The workspace's name or id (from workspace_create or workspace_list)."`
	Command    string `json:"command" jsonschema:"The bash command line to run: may hold several commands, pipes, && and newlines."`
	Session    string `json:"session,omitempty" jsonschema:"Shell session name (default \"default\"). Each session is a separate bash with its own working directory, variables and history, created on first use. Use another session to run a command while one runs."`
	TimeoutMS  int64  `json:"timeout_ms,omitempty" jsonschema:"Interrupt the command after this many milliseconds; the session and its state survive. Default 600000 (10 minutes) for a foreground command, none with background."`
	Background bool   `json:"background,omitempty" jsonschema:"Start the command and return its command_id at once, without waiting: for servers, watchers and very long jobs. Read its output and status with command_output, stop it with command_signal."`
	Stdin      string `json:"stdin,omitempty" jsonschema:"Text the command reads on its standard input (default: it reads EOF at once)."`
}

// RunOut is run's result.
type RunOut struct {
	Workspace string `json:"workspace" jsonschema:"The workspace."`
	Session   string `json:"session" jsonschema:"The session the command ran in."`
	CommandID string `json:"command_id" jsonschema:"The command's id, for command_output and command_signal: a number (\"3\") in the default session, the session and a number (\"build:3\") in any other."`
	// Background: started, not finished; the fields below are empty.
	Background bool   `json:"background" jsonschema:"The command was started in the background and may still run."`
	ExitCode   *int   `json:"exit_code,omitempty" jsonschema:"The command's exit status (128+N when killed by signal N)."`
	Stdout     string `json:"stdout,omitempty" jsonschema:"Standard output (head and tail when long, with a marker between)."`
	Stderr     string `json:"stderr,omitempty" jsonschema:"Standard error (head and tail when long, with a marker between)."`
	// StdoutBytes and StderrBytes are the streams' full sizes.
	StdoutBytes   int64  `json:"stdout_bytes" jsonschema:"Full size of stdout in bytes."`
	StderrBytes   int64  `json:"stderr_bytes" jsonschema:"Full size of stderr in bytes."`
	StdoutOmitted int64  `json:"stdout_omitted,omitempty" jsonschema:"Bytes of stdout not shown."`
	StderrOmitted int64  `json:"stderr_omitted,omitempty" jsonschema:"Bytes of stderr not shown."`
	Cwd           string `json:"cwd,omitempty" jsonschema:"The shell's working directory after the command."`
	TimedOut      bool   `json:"timed_out,omitempty" jsonschema:"The command ran past its timeout and was interrupted."`
	Interrupted   bool   `json:"interrupted,omitempty" jsonschema:"The command was interrupted (timeout or signal)."`
	SessionEnded  bool   `json:"session_ended,omitempty" jsonschema:"The session's shell exited (exit, exec, a fatal signal): its state is gone; the next run in the session starts a new shell."`
	Notice        string `json:"notice,omitempty" jsonschema:"What the sidecar had to do to keep the session usable."`
	DurationMS    int64  `json:"duration_ms,omitempty" jsonschema:"How long the command ran."`
}

// CommandOutputIn is command_output's arguments.
type CommandOutputIn struct {
	Workspace string `json:"workspace" jsonschema:"The workspace's name or id."`
	CommandID string `json:"command_id" jsonschema:"The command's id, exactly as run returned it: \"3\" in the default session, \"build:3\" in session build."`
	Stream    string `json:"stream" jsonschema:"Which output: stdout or stderr."`
	Offset    int64  `json:"offset,omitempty" jsonschema:"Byte offset to read from (default 0): the offset an omission marker names, or next_offset of the previous call."`
	Session   string `json:"session,omitempty" jsonschema:"Not needed: command_id names its session. For a bare number, the session it is in (default \"default\")."`
	MaxBytes  int    `json:"max_bytes,omitempty" jsonschema:"Most bytes to return (default 32768)."`
	WaitMS    int64  `json:"wait_ms,omitempty" jsonschema:"If the command is still running, first wait up to this many milliseconds for it to finish (default 0: do not wait)."`
	Encoding  string `json:"encoding,omitempty" jsonschema:"text (default; invalid UTF-8 shown as U+FFFD) or base64 (the exact bytes)."`
}

// CommandOutputOut is command_output's result.
type CommandOutputOut struct {
	CommandID   string `json:"command_id" jsonschema:"The command (session:number outside the default session)."`
	Stream      string `json:"stream" jsonschema:"stdout or stderr."`
	State       string `json:"state" jsonschema:"running, finished or lost."`
	ExitCode    *int   `json:"exit_code,omitempty" jsonschema:"The exit status, once finished."`
	Offset      int64  `json:"offset" jsonschema:"Offset of the first byte returned."`
	NextOffset  int64  `json:"next_offset" jsonschema:"Offset to read from next (the stream's end when offset was past it)."`
	TotalBytes  int64  `json:"total_bytes" jsonschema:"The stream's size so far."`
	EOF         bool   `json:"eof" jsonschema:"The command has finished and everything up to the end was read."`
	Data        string `json:"data" jsonschema:"The bytes read, as text or base64 (see encoding)."`
	Encoding    string `json:"encoding" jsonschema:"text or base64."`
	StdoutBytes int64  `json:"stdout_bytes" jsonschema:"Size of stdout so far."`
	StderrBytes int64  `json:"stderr_bytes" jsonschema:"Size of stderr so far."`
}

// CommandSignalIn is command_signal's arguments.
type CommandSignalIn struct {
	Workspace string `json:"workspace" jsonschema:"The workspace's name or id."`
	CommandID string `json:"command_id" jsonschema:"The running command's id, exactly as run returned it: \"3\" in the default session, \"build:3\" in session build."`
	Signal    string `json:"signal" jsonschema:"INT (like Ctrl-C), TERM, KILL, HUP, QUIT, USR1 or USR2."`
	Session   string `json:"session,omitempty" jsonschema:"Not needed: command_id names its session. For a bare number, the session it runs in (default \"default\")."`
}

// CommandSignalOut is command_signal's result.
type CommandSignalOut struct {
	CommandID string `json:"command_id" jsonschema:"The command (session:number outside the default session)."`
	Signal    string `json:"signal" jsonschema:"The signal sent."`
	State     string `json:"state" jsonschema:"The command's state after a short wait: running, finished or lost."`
	ExitCode  *int   `json:"exit_code,omitempty" jsonschema:"The exit status, if it finished."`
}

// FileReadIn is file_read's arguments.
type FileReadIn struct {
	Workspace string `json:"workspace" jsonschema:"The workspace's name or id."`
	Path      string `json:"path" jsonschema:"Path of the file, relative to /workspace (not to the shell's current directory); an absolute path under /workspace works too."`
	StartLine int    `json:"start_line,omitempty" jsonschema:"First line to return, 1-based (default 1)."`
	EndLine   int    `json:"end_line,omitempty" jsonschema:"Last line to return, inclusive (default: the end of the file, up to 2000 lines per call)."`
}

// FileReadOut is file_read's result.
type FileReadOut struct {
	Path       string `json:"path" jsonschema:"The file, as /workspace/<path>."`
	Content    string `json:"content" jsonschema:"The lines returned, exactly (no line numbers)."`
	StartLine  int    `json:"start_line" jsonschema:"First line returned (0 when none)."`
	EndLine    int    `json:"end_line" jsonschema:"Last line returned (0 when none)."`
	TotalLines int    `json:"total_lines" jsonschema:"Lines in the file."`
	Size       int64  `json:"size" jsonschema:"The file's size in bytes."`
	Truncated  bool   `json:"truncated" jsonschema:"Fewer lines than asked were returned, to keep the answer short."`
	Binary     bool   `json:"binary,omitempty" jsonschema:"The file holds NUL bytes: binary, not shown."`
}

// FileWriteIn is file_write's arguments.
type FileWriteIn struct {
	Workspace string `json:"workspace" jsonschema:"The workspace's name or id."`
	Path      string `json:"path" jsonschema:"Path of the file, relative to /workspace (not to the shell's current directory); an absolute path under /workspace works too. Missing parent directories are created."`
	Content   string `json:"content" jsonschema:"The file's whole new content."`
}

// FileWriteOut is file_write's result.
type FileWriteOut struct {
	Path  string `json:"path" jsonschema:"The file written."`
	Bytes int    `json:"bytes" jsonschema:"Bytes written."`
	Lines int    `json:"lines" jsonschema:"Lines written."`
}

// FileEditIn is file_edit's arguments.
type FileEditIn struct {
	Workspace  string `json:"workspace" jsonschema:"The workspace's name or id."`
	Path       string `json:"path" jsonschema:"Path of the file, relative to /workspace (not to the shell's current directory); an absolute path under /workspace works too."`
	Search     string `json:"search" jsonschema:"The exact text to replace, as it is in the file: whitespace, indentation and line breaks included, without file_read's line numbers. Include enough surrounding lines to make it unique."`
	Replace    string `json:"replace" jsonschema:"The text to put in its place (may be empty to delete)."`
	WhichMatch int    `json:"which_match,omitempty" jsonschema:"When search occurs several times: which occurrence to replace, 1-based, counted from the top of the file."`
}

// FileEditOut is file_edit's result.
type FileEditOut struct {
	Path    string `json:"path" jsonschema:"The file edited."`
	Match   int    `json:"match" jsonschema:"The occurrence replaced (1-based)."`
	Matches int    `json:"matches" jsonschema:"How many times search occurred."`
	Line    int    `json:"line" jsonschema:"The line where the replacement starts."`
	Bytes   int    `json:"bytes" jsonschema:"The file's new size."`
}

// FileListIn is file_list's arguments.
type FileListIn struct {
	Workspace string `json:"workspace" jsonschema:"The workspace's name or id."`
	Path      string `json:"path,omitempty" jsonschema:"Directory to list, relative to /workspace (default: /workspace itself)."`
}

// FileEntry is one entry of a directory.
type FileEntry struct {
	Name string `json:"name" jsonschema:"The entry's name."`
	Type string `json:"type" jsonschema:"file, dir, symlink or other."`
	Size int64  `json:"size" jsonschema:"Size in bytes."`
	Mode string `json:"mode" jsonschema:"Permissions, as ls shows them."`
}

// FileListOut is file_list's result.
type FileListOut struct {
	Path      string      `json:"path" jsonschema:"The directory listed."`
	Entries   []FileEntry `json:"entries" jsonschema:"Its entries, by name."`
	Total     int         `json:"total" jsonschema:"How many entries it has."`
	Truncated bool        `json:"truncated" jsonschema:"Not all entries are listed."`
}

// FileDeleteIn is file_delete's arguments.
type FileDeleteIn struct {
	Workspace string `json:"workspace" jsonschema:"The workspace's name or id."`
	Path      string `json:"path" jsonschema:"Path of the file or directory to delete (a directory with everything in it), relative to /workspace."`
}

// FileDeleteOut is file_delete's result.
type FileDeleteOut struct {
	Path string `json:"path" jsonschema:"What was deleted."`
}

// WorkspaceIn is the arguments of tools that take only a workspace (diff,
// log, workspace_stop, workspace_start, session_list, apply).
type WorkspaceIn struct {
	Workspace string `json:"workspace" jsonschema:"The workspace's name or id."`
}

// FileChange summarises one changed file.
type FileChange struct {
	Path    string `json:"path" jsonschema:"The file."`
	OldPath string `json:"old_path,omitempty" jsonschema:"Its path before a rename or copy."`
	Status  string `json:"status" jsonschema:"added, modified, deleted, renamed, copied or typechange."`
	Added   int    `json:"added" jsonschema:"Lines added."`
	Deleted int    `json:"deleted" jsonschema:"Lines deleted."`
	Binary  bool   `json:"binary,omitempty" jsonschema:"A binary file."`
}

// DiffOut is diff's result.
type DiffOut struct {
	Base        string       `json:"base" jsonschema:"What the changes are against."`
	Commit      string       `json:"commit" jsonschema:"The workspace's commit this diff is of: merge merges exactly it (pass it as merge's commit, or leave commit out to merge what the last diff showed)."`
	Uncommitted bool         `json:"uncommitted" jsonschema:"Part of the diff is not committed yet: commit it before merging."`
	Files       []FileChange `json:"files" jsonschema:"Every changed file."`
	Diff        string       `json:"diff" jsonschema:"The unified diff (cut when long)."`
	Truncated   bool         `json:"truncated" jsonschema:"The diff text was cut."`
}

// CommitIn is commit's arguments.
type CommitIn struct {
	Workspace string `json:"workspace" jsonschema:"The workspace's name or id."`
	Message   string `json:"message" jsonschema:"The commit message: a short summary line, then optionally a blank line and details."`
}

// CommitOut is commit's result.
type CommitOut struct {
	Commit    string `json:"commit" jsonschema:"The branch's head commit after committing."`
	Committed bool   `json:"committed" jsonschema:"false when there was nothing to commit."`
	Reviewed  bool   `json:"reviewed" jsonschema:"The commit records exactly what the last diff showed, so merge takes it; false: call diff again before merging."`
}

// MergeIn is merge's arguments.
type MergeIn struct {
	Workspace string `json:"workspace" jsonschema:"The workspace's name or id."`
	Into      string `json:"into,omitempty" jsonschema:"Branch of the user's repository to merge into (default: the branch the workspace was created from)."`
	Commit    string `json:"commit,omitempty" jsonschema:"The commit to merge, whole or its first 10 hex digits, as diff or commit named it: exactly it is merged. Default: the commit the last diff showed, refused if the workspace changed since."`
}

// MergeOut is merge's result.
type MergeOut struct {
	Into        string `json:"into" jsonschema:"The branch merged into."`
	Previous    string `json:"previous" jsonschema:"Its commit before the merge."`
	Commit      string `json:"commit" jsonschema:"Its commit after the merge."`
	Merged      string `json:"merged" jsonschema:"The workspace's commit that was merged."`
	FastForward bool   `json:"fast_forward" jsonschema:"The branch was moved forward, no merge commit."`
	UpToDate    bool   `json:"up_to_date" jsonschema:"There was nothing to merge."`
	Uncommitted bool   `json:"uncommitted" jsonschema:"The workspace has uncommitted changes, which were not merged."`
}

// LogEntry is one event of a workspace's log.
type LogEntry struct {
	Time     string `json:"time" jsonschema:"When, RFC 3339."`
	Kind     string `json:"kind" jsonschema:"What happened: create, command, commit, merge, ..."`
	ExitCode *int   `json:"exit_code,omitempty" jsonschema:"A command's exit status."`
	Message  string `json:"message" jsonschema:"Details."`
}

// LogOut is log's result.
type LogOut struct {
	Entries []LogEntry `json:"entries" jsonschema:"The latest events, oldest first."`
	Total   int        `json:"total" jsonschema:"How many events the log holds."`
}

// NetworkRestrictIn is network_restrict's arguments.
type NetworkRestrictIn struct {
	Workspace string   `json:"workspace" jsonschema:"The workspace's name or id."`
	Allow     []string `json:"allow,omitempty" jsonschema:"Keep only these destinations: DNS names (pypi.org), wildcards (*.golang.org), addresses or CIDR prefixes, each with an optional :port. Each must already be allowed by the current policy."`
	None      bool     `json:"none,omitempty" jsonschema:"Take all network away instead."`
}

// NetworkOut is network_restrict's result: the policy now.
type NetworkOut struct {
	Mode  string   `json:"mode" jsonschema:"none, open (the internet, nothing private) or allow (only the list)."`
	Allow []string `json:"allow,omitempty" jsonschema:"What mode allow lets through."`
}

// PortForwardIn is port_forward's arguments.
type PortForwardIn struct {
	Workspace string `json:"workspace" jsonschema:"The workspace's name or id."`
	Port      int    `json:"port" jsonschema:"The TCP port a server listens on inside the workspace (1-65535)."`
	Close     bool   `json:"close,omitempty" jsonschema:"Stop forwarding the port instead (its open connections are closed)."`
}

// PortForwardOut is port_forward's result.
type PortForwardOut struct {
	Port    int    `json:"port" jsonschema:"The port inside the workspace."`
	Address string `json:"address,omitempty" jsonschema:"Where the port is reachable on the user's machine (host:port); empty once closed."`
	URL     string `json:"url,omitempty" jsonschema:"The same address as an http:// URL."`
	Closed  bool   `json:"closed,omitempty" jsonschema:"Whether the forward was closed."`
}

// WorkspaceForkIn is workspace_fork's arguments.
type WorkspaceForkIn struct {
	Workspace string `json:"workspace" jsonschema:"The workspace to fork (its name or id)."`
	Name      string `json:"name,omitempty" jsonschema:"The new workspace's name (default: generated)."`
}

// SessionListOut is session_list's result.
type SessionListOut struct {
	Sessions []SessionOut `json:"sessions" jsonschema:"The workspace's sessions."`
}

// SessionOut is one session.
type SessionOut struct {
	ID      string `json:"id" jsonschema:"The session's name (run's session)."`
	Cwd     string `json:"cwd" jsonschema:"Its shell's working directory."`
	Status  string `json:"status" jsonschema:"idle, running, ended or closed."`
	Running string `json:"running,omitempty" jsonschema:"The id of the command it runs now."`
}

// ApplyOut is apply's result.
type ApplyOut struct {
	Dir   string   `json:"dir" jsonschema:"The user's checkout the changes were applied to."`
	Files []string `json:"files" jsonschema:"The files changed there."`
}
