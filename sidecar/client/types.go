package client

import (
	"encoding/base64"
	"time"
)

// Workspace statuses.
const (
	StatusRunning = "running"
	StatusStopped = "stopped"
	// StatusAdopting: a sidecar that just started is reconnecting to the
	// workspace; calls that need it wait a little for it.
	StatusAdopting = "adopting"
)

// CreateWorkspaceRequest is the body of POST /v1/workspaces.
type CreateWorkspaceRequest struct {
	// Name names the workspace (and its branch patina/<name>); generated
	// when empty.
	Name string `json:"name,omitempty"`
	// Repo is a path inside a git repository on the sidecar's machine; the
	// workspace is a branch + worktree of it. Empty: a scratch workspace
	// with an empty directory and no git.
	Repo string `json:"repo,omitempty"`
	// Base is the ref the branch starts from (default: the repo's HEAD).
	Base string `json:"base,omitempty"`
	// Image is the container image (default patina/base:bookworm; for a
	// repository with a devcontainer.json, its template).
	Image string `json:"image,omitempty"`
	// Template names a template (GET /v1/templates) to start from, in place
	// of an image.
	Template string `json:"template,omitempty"`
	// Dockerfile is a Dockerfile's path in Repo: the workspace starts from
	// its template (built once per content).
	Dockerfile string `json:"dockerfile,omitempty"`
	// Env is set in the container (and so in every session).
	Env map[string]string `json:"env,omitempty"`
	// SecretEnv is set in every session's environment but never in the
	// container's configuration, and its values are never shown (ws show,
	// the API, the sidecar's logs, the workspace's log, docker inspect).
	SecretEnv map[string]string `json:"secret_env,omitempty"`
	// Secrets names the secrets (PUT /v1/secrets/{name}) the workspace may
	// use: requests it sends over HTTPS to a secret's hosts get the
	// secret's header, set by the sidecar's egress proxy. The workspace
	// never holds a value: an environment variable of the secret's name
	// holds a placeholder, which the proxy swaps for the value in those
	// requests' headers.
	Secrets []string `json:"secrets,omitempty"`
	// MemoryMB, CPUs and PidsLimit bound the container (0: the sidecar's
	// defaults).
	MemoryMB  int64   `json:"memory_mb,omitempty"`
	CPUs      float64 `json:"cpus,omitempty"`
	PidsLimit int64   `json:"pids_limit,omitempty"`
	// DiskMB bounds everything the workspace writes (its files, its
	// sessions' state and history, what it installs in its container) in
	// MiB: writing past it gives ENOSPC inside (0: the sidecar's --disk).
	// Refused (400) where the sidecar cannot enforce it (a remote engine,
	// --engine swarm, a sidecar that is not root).
	DiskMB int64 `json:"disk_mb,omitempty"`
	// Network is the workspace's network policy (default: mode "open";
	// "none" on a sidecar that cannot enforce a policy, see README
	// "Network"). The strings "none" and "open" are accepted too.
	Network *NetworkPolicy `json:"network,omitempty"`
	// IdleStop stops the workspace after this long without activity (a Go
	// duration from 1s to 720h: "15m"); "0": never; empty: the sidecar's
	// --idle-stop. The next exec, session call or port connection starts
	// it again, with each session's state.
	IdleStop string `json:"idle_stop,omitempty"`
	// Placement are Swarm placement constraints for a sidecar run with
	// --engine swarm ("node.labels.gpu==1", "node.role==worker"); the
	// workspace then stays on the node it lands on. Refused (400) on a
	// single Docker engine.
	Placement []string `json:"placement,omitempty"`
}

// Workspace describes a workspace.
type Workspace struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Branch is patina/<name> for a repository workspace, "" without one.
	Branch string `json:"branch"`
	// Worktree is the workspace's directory on the sidecar's machine,
	// mounted at /workspace in the container.
	Worktree string `json:"worktree"`
	// Template is the template it was made from ("": none).
	Template   string `json:"template,omitempty"`
	Repo       string `json:"repo,omitempty"`
	Base       string `json:"base,omitempty"`
	BaseCommit string `json:"base_commit,omitempty"`
	// Status is "running", "stopped" or "adopting".
	Status string `json:"status"`
	// Error says why a workspace is stopped when nobody stopped it (its
	// container died or was removed).
	Error string `json:"error,omitempty"`
	// Notice says something its owner should know (it was migrated, its
	// state note disagrees with the sidecar's record).
	Notice string `json:"notice,omitempty"`
	// Agent describes the workspace's agent, the process inside its
	// container that runs its sessions.
	Agent     *AgentStatus  `json:"agent,omitempty"`
	Image     string        `json:"image"`
	Network   NetworkPolicy `json:"network"`
	MemoryMB  int64         `json:"memory_mb"`
	CPUs      float64       `json:"cpus"`
	PidsLimit int64         `json:"pids_limit"`
	// DiskMB is the size of its disk and DiskUsedMB how much of it is used
	// (absent: no disk limit, see CreateWorkspaceRequest.DiskMB).
	DiskMB     int64             `json:"disk_mb,omitempty"`
	DiskUsedMB *int64            `json:"disk_used_mb,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	// SecretEnv are the names of its secret environment variables (never
	// their values), Secrets the names of the secrets it holds.
	SecretEnv   []string  `json:"secret_env,omitempty"`
	Secrets     []string  `json:"secrets,omitempty"`
	ContainerID string    `json:"container_id,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	// Ports are its forwarded ports (POST /v1/workspaces/{id}/ports).
	Ports []PortForward `json:"ports,omitempty"`
	// ForkOf is the id of the workspace it was forked from, if it was.
	ForkOf string `json:"fork_of,omitempty"`
	// IdleStop is how long it may be idle before it is stopped (absent:
	// never). A workspace stopped for being idle says so in Error, and is
	// started again by its next use.
	IdleStop string `json:"idle_stop,omitempty"`
	// IdleStopped: it is stopped because it was idle (Error says for how
	// long), not because it failed; its next exec, attach or port
	// connection starts it again.
	IdleStopped bool `json:"idle_stopped,omitempty"`
	// IdlePaused: idle stop has paused it (its first stage): its
	// processes are kept, frozen, and its next use resumes it in
	// milliseconds; false while IdleStopped: its container is stopped.
	IdlePaused bool `json:"idle_paused,omitempty"`
	// Placement are its placement constraints (--engine swarm).
	Placement []string `json:"placement,omitempty"`
	// LastActivity is the time of its last recorded activity (see README
	// "Idle stop": calls that reach it, running commands, port
	// connections); absent before any since the sidecar started.
	LastActivity *time.Time `json:"last_activity,omitempty"`
}

// AgentStatus describes a workspace's agent.
type AgentStatus struct {
	// Connected says the sidecar holds a connection to it now.
	Connected bool       `json:"connected"`
	PID       int        `json:"pid,omitempty"`
	Version   string     `json:"version,omitempty"`
	StartedAt *time.Time `json:"started_at,omitempty"`
	// Restarts counts the times the sidecar started it again after it died
	// or stopped answering; LastRestart and LastRestartReason say when and
	// why the last time.
	Restarts          int        `json:"restarts"`
	LastRestart       *time.Time `json:"last_restart,omitempty"`
	LastRestartReason string     `json:"last_restart_reason,omitempty"`
	// Error says why it cannot be reached, if it cannot.
	Error string `json:"error,omitempty"`
}

// CreateSessionRequest is the body of POST /v1/workspaces/{id}/sessions.
type CreateSessionRequest struct {
	// ID names the session (generated when empty).
	ID string `json:"id,omitempty"`
	// Cwd is the starting directory inside the container (default
	// /workspace).
	Cwd string `json:"cwd,omitempty"`
	// Env is exported in the session's shell.
	Env map[string]string `json:"env,omitempty"`
}

// Session describes a session.
type Session struct {
	ID string `json:"id"`
	// Cwd is the shell's current directory.
	Cwd string `json:"cwd"`
	// Status is idle, running, ended or closed.
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"created_at"`
	// Running is the id of the command running now, if any.
	Running  string `json:"running,omitempty"`
	Commands int    `json:"commands"`
	// ExitCode and EndReason say how an ended session ended.
	ExitCode     *int   `json:"exit_code,omitempty"`
	EndReason    string `json:"end_reason,omitempty"`
	Replacements int    `json:"replacements,omitempty"`
	// Terminal: a terminal has the session (attach); exec answers 409 busy
	// until it ends.
	Terminal bool `json:"terminal,omitempty"`
}

// SetEnvRequest is the body of POST .../sessions/{sid}/env.
type SetEnvRequest struct {
	Env   map[string]string `json:"env"`
	Unset []string          `json:"unset,omitempty"`
}

// ExecRequest is the body of POST .../sessions/{sid}/exec.
type ExecRequest struct {
	Command string `json:"command"`
	// TimeoutMS stops the command after this many milliseconds (0: none).
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// Stdin is the command's standard input as text; StdinBase64 as bytes.
	// Neither: the command reads EOF.
	Stdin       *string `json:"stdin,omitempty"`
	StdinBase64 string  `json:"stdin_base64,omitempty"`
	// Async returns 202 {command_id} at once.
	Async bool `json:"async,omitempty"`
	// TTY runs the command on a terminal of Rows x Cols (default 24x80,
	// each 1..1000): its stdout and stderr, and its stdin unless stdin is
	// given, are the terminal; what it prints (CR LF line ends) is its
	// stdout. It runs in a subshell of the session: it sees the session's
	// cwd, variables and functions, and what it changes is not kept.
	TTY  bool `json:"tty,omitempty"`
	Rows int  `json:"rows,omitempty"`
	Cols int  `json:"cols,omitempty"`
	// Term is TERM for a TTY command (default xterm-256color).
	Term string `json:"term,omitempty"`
}

// ExecResult is the outcome of a command.
//
// Stdout and Stderr hold the output as text. When it is not valid UTF-8,
// they hold it with invalid bytes replaced, and StdoutBase64/StderrBase64
// hold it exactly; use StdoutData/StderrData to get the bytes. When the
// output exceeds the sidecar's limit, the fields hold its head, *Tail its
// tail, *Truncated is set and *Bytes gives the full size (read the rest from
// .../commands/{cid}/stdout?offset=N).
type ExecResult struct {
	CommandID       string `json:"command_id"`
	ExitCode        int    `json:"exit_code"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutBase64    string `json:"stdout_base64,omitempty"`
	StderrBase64    string `json:"stderr_base64,omitempty"`
	StdoutTail      string `json:"stdout_tail,omitempty"`
	StderrTail      string `json:"stderr_tail,omitempty"`
	StdoutTailB64   string `json:"stdout_tail_base64,omitempty"`
	StderrTailB64   string `json:"stderr_tail_base64,omitempty"`
	StdoutBytes     int64  `json:"stdout_bytes"`
	StderrBytes     int64  `json:"stderr_bytes"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
	TimedOut        bool   `json:"timed_out"`
	Interrupted     bool   `json:"interrupted"`
	SessionEnded    bool   `json:"session_ended"`
	ShellReplaced   bool   `json:"shell_replaced,omitempty"`
	// Resumed: the workspace had been stopped for being idle and was
	// started again to run this command (its sessions' state restored).
	Resumed    bool    `json:"resumed,omitempty"`
	Notice     string  `json:"notice,omitempty"`
	Cwd        string  `json:"cwd,omitempty"`
	DurationMS float64 `json:"duration_ms"`
}

// StdoutData returns stdout's bytes exactly (the head, when truncated).
func (r ExecResult) StdoutData() []byte { return textOrBase64(r.Stdout, r.StdoutBase64) }

// StderrData returns stderr's bytes exactly (the head, when truncated).
func (r ExecResult) StderrData() []byte { return textOrBase64(r.Stderr, r.StderrBase64) }

func textOrBase64(text, b64 string) []byte {
	if b64 != "" {
		if b, err := base64.StdEncoding.DecodeString(b64); err == nil {
			return b
		}
	}
	return []byte(text)
}

// AsyncResult is the 202 answer to an async exec.
type AsyncResult struct {
	CommandID string `json:"command_id"`
}

// Command is a command's history record.
type Command struct {
	ID      string `json:"id"`
	Command string `json:"command"`
	// State is running, finished or lost.
	State         string     `json:"state"`
	StartedAt     time.Time  `json:"started_at"`
	EndedAt       *time.Time `json:"ended_at,omitempty"`
	ExitCode      *int       `json:"exit_code,omitempty"`
	StdoutBytes   int64      `json:"stdout_bytes"`
	StderrBytes   int64      `json:"stderr_bytes"`
	TimedOut      bool       `json:"timed_out,omitempty"`
	Interrupted   bool       `json:"interrupted,omitempty"`
	SessionEnded  bool       `json:"session_ended,omitempty"`
	ShellReplaced bool       `json:"shell_replaced,omitempty"`
	OutputPruned  bool       `json:"output_pruned,omitempty"`
}

// SignalRequest is the body of POST .../commands/{cid}/signal.
type SignalRequest struct {
	// Signal is INT, TERM, KILL, HUP, QUIT, USR1 or USR2.
	Signal string `json:"signal"`
}

// StreamEvent is one event of an exec streamed with
// Accept: text/event-stream. Event is "stdout", "stderr" or "exit"; for
// output, Data holds the chunk as text (or DataBase64 when it is not valid
// UTF-8); for exit, Result holds the result (with output fields empty: the
// output came as events).
type StreamEvent struct {
	Event      string      `json:"-"`
	Data       string      `json:"data,omitempty"`
	DataBase64 string      `json:"data_base64,omitempty"`
	Offset     int64       `json:"offset"`
	Result     *ExecResult `json:"result,omitempty"`
}

// Bytes returns an output event's bytes.
func (e StreamEvent) Bytes() []byte { return textOrBase64(e.Data, e.DataBase64) }

// FileInfo is one entry of a directory listing (GET .../files/{dir}).
type FileInfo struct {
	Name    string    `json:"name"`
	Type    string    `json:"type"` // file, dir, symlink, other
	Size    int64     `json:"size"`
	Mode    string    `json:"mode"`
	ModTime time.Time `json:"mod_time"`
}

// Diff is GET .../diff: the workspace's changes against its base,
// committed, uncommitted and untracked.
type Diff struct {
	Base string `json:"base"`
	// Commit is the workspace's HEAD the diff shows (its commits), plus
	// uncommitted work when Uncommitted. The sidecar remembers it: a merge
	// that names no commit merges exactly it, and refuses once the
	// workspace moved on (look again), or while the diff held uncommitted
	// work (commit it first). Merge's "commit" names it explicitly.
	Commit string     `json:"commit,omitempty"`
	Text   string     `json:"text"`
	Files  []FileStat `json:"files"`
	// Truncated says Text was cut at the sidecar's limit; FilesTruncated
	// that Files was.
	Truncated      bool `json:"truncated,omitempty"`
	FilesTruncated bool `json:"files_truncated,omitempty"`
	// Uncommitted says part of the diff is work not committed in the
	// workspace, which merge does not record: commit it first (the commit
	// keeps the review when it records exactly what was shown).
	Uncommitted bool `json:"uncommitted,omitempty"`
	// Repaired says the workspace's own repository was broken (its HEAD
	// named no readable commit) and was made again at the base commit,
	// the files kept: every change since the base shows as uncommitted.
	Repaired string `json:"repaired,omitempty"`
}

// FileStat summarises one changed file.
type FileStat struct {
	Path    string `json:"path"`
	OldPath string `json:"old_path,omitempty"`
	// Status is added, modified, deleted, renamed, copied or typechange.
	Status  string `json:"status"`
	Added   int    `json:"added"`
	Deleted int    `json:"deleted"`
	Binary  bool   `json:"binary,omitempty"`
}

// CommitRequest is the body of POST .../commit.
type CommitRequest struct {
	Message string `json:"message"`
	// AuthorName and AuthorEmail override the sidecar's default author.
	AuthorName  string `json:"author_name,omitempty"`
	AuthorEmail string `json:"author_email,omitempty"`
}

// CommitResult says what Commit did.
type CommitResult struct {
	Commit string `json:"commit"`
	// Committed is false when there was nothing to commit.
	Committed bool `json:"committed"`
	// Reviewed says Commit records exactly what the last diff showed (the
	// same files, on the commit it showed): a merge that names no commit
	// takes it. False: look at the diff before merging.
	Reviewed bool `json:"reviewed"`
	// Repaired: as Diff.Repaired; the repository was re-seeded before the
	// commit.
	Repaired string `json:"repaired,omitempty"`
}

// MergeRequest is the body of POST .../merge.
type MergeRequest struct {
	// Into is the target branch (default: the branch the workspace was
	// created from).
	Into string `json:"into,omitempty"`
	// Commit is the commit to merge, whole or abbreviated (at least 4 hex
	// digits; what diff or commit named): exactly it is merged, and it must
	// be on the workspace's branch (400 invalid otherwise, and for an id
	// that names no commit or several). Empty: the commit the last diff
	// showed (409 conflict when nothing was reviewed, the workspace moved
	// on since, or the diff held uncommitted work).
	Commit string `json:"commit,omitempty"`
}

// MergeResult says what Merge did.
type MergeResult struct {
	Into     string `json:"into"`
	Previous string `json:"previous"`
	Commit   string `json:"commit"`
	// Merged is the workspace's commit that was merged.
	Merged      string `json:"merged"`
	FastForward bool   `json:"fast_forward"`
	UpToDate    bool   `json:"up_to_date"`
	// Uncommitted says the workspace had uncommitted changes, which were
	// not merged (commit first).
	Uncommitted bool `json:"uncommitted"`
}

// ApplyResult says what Apply staged in the user's working tree.
type ApplyResult struct {
	Dir   string     `json:"dir"`
	Files []FileStat `json:"files"`
}

// LogEntry is one line of a workspace's log (refs/notes/patina-log).
type LogEntry struct {
	Time     time.Time `json:"time"`
	Kind     string    `json:"kind"`
	ExitCode *int      `json:"exit_code,omitempty"`
	Message  string    `json:"message"`
	Line     string    `json:"line"`
}

// ErrorBody is every error answer: {"error": "...", "code": "..."}.
type ErrorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
	// Field names the request's field at fault, when one is: "into" of a
	// merge that names no branch, "base" of a create, "template".
	Field string `json:"field,omitempty"`
}

// Error codes, with their HTTP statuses.
const (
	CodeInvalid          = "invalid"            // 400
	CodeUnauthorized     = "unauthorized"       // 401
	CodeNotFound         = "not_found"          // 404
	CodeBusy             = "busy"               // 409: the session runs another command
	CodeEnded            = "ended"              // 409: the session's shell has ended
	CodeConflict         = "conflict"           // 409: exists already, merge conflict, dirty tree
	CodeStopped          = "stopped"            // 409: the workspace is stopped
	CodeTooLarge         = "too_large"          // 413
	CodeMethodNotAllowed = "method_not_allowed" // 405, with an Allow header
	CodeUnavailable      = "unavailable"        // 503: e.g. the image is missing
	CodeInternal         = "internal"           // 500
	CodeNotRunning       = "not_running"        // 409: the command already finished
	CodeNoRepository     = "no_repository"      // 409: a git operation on a scratch workspace
	CodeAgentUnavailable = "agent_unavailable"  // 503: the workspace's agent cannot be reached or misbehaves
	CodeRejected         = "rejected"           // 422: objects a workspace sent failed patina's checks
	CodeAdopting         = "adopting"           // 503: the sidecar is still reconnecting to the workspace
	CodeNotListening     = "not_listening"      // 409: nothing listens on that port inside the workspace
)

// ForwardPortRequest is the body of POST /v1/workspaces/{id}/ports.
type ForwardPortRequest struct {
	// Port is the TCP port a server listens on inside the workspace (on
	// its loopback or on all addresses).
	Port int `json:"port"`
	// HostPort is the port to listen on on the sidecar's host (0: any
	// free one).
	HostPort int `json:"host_port,omitempty"`
}

// PortForward is a workspace port reachable on the sidecar's host.
type PortForward struct {
	// Port is the port inside the workspace.
	Port int `json:"port"`
	// Address is where to connect on the sidecar's host (host:port), and
	// URL the same as an http:// URL.
	Address string `json:"address"`
	URL     string `json:"url"`
	// Connections is how many connections are open through it now.
	Connections int       `json:"connections"`
	CreatedAt   time.Time `json:"created_at"`
}

// PortList is the answer of GET /v1/workspaces/{id}/ports.
type PortList struct {
	Ports []PortForward `json:"ports"`
}

// MaxForkCount is the most forks one ForkWorkspaceRequest may ask for.
const MaxForkCount = 16

// ForkWorkspaceRequest is the body of POST /v1/workspaces/{id}/fork.
type ForkWorkspaceRequest struct {
	// Name names the new workspace (and its branch patina/<name>);
	// generated when empty.
	Name string `json:"name,omitempty"`
	// KeepSecrets gives the fork the secrets its source holds (without
	// it, it holds none).
	KeepSecrets bool `json:"keep_secrets,omitempty"`
	// Count makes this many forks at once (1 to MaxForkCount; default 1), named
	// <name>-1 ... <name>-N when Name is set. With 2 or more the answer is
	// an array of workspaces (ForkWorkspaces); all are made or none.
	Count int `json:"count,omitempty"`
}

// TerminalMessage is a text message of a terminal WebSocket
// (GET .../sessions/{sid}/terminal). The server sends "hello" first (where
// the output that follows starts, as a byte offset of the terminal's
// output; whether this connection started the terminal; whether the
// workspace was resumed for it), then the output as binary messages, and
// "exit" last. A client sends its input as binary messages (or as text
// messages: xterm.js's attach addon does), and "resize" {rows, cols} and
// "end" as text messages holding exactly this JSON object.
type TerminalMessage struct {
	Type     string `json:"type"` // hello, exit, resize, end
	Session  string `json:"session,omitempty"`
	Offset   *int64 `json:"offset,omitempty"`
	Started  bool   `json:"started,omitempty"`
	Resumed  bool   `json:"resumed,omitempty"`
	Rows     int    `json:"rows,omitempty"`
	Cols     int    `json:"cols,omitempty"`
	ExitCode *int   `json:"exit_code,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// ConsoleCode is the answer of POST /v1/console/codes: a one-time code
// that signs a browser in to the web console once, within a short time.
type ConsoleCode struct {
	Code string `json:"code"`
	// Path is the console's path with the code in its fragment (which a
	// browser never sends, so no log holds it): append it to the
	// sidecar's address.
	Path    string    `json:"path"`
	Expires time.Time `json:"expires"`
}

// WorkspaceDeleted is the data of a "workspace_deleted" event of GET
// /v1/events. The events (the SSE event name, then its data): "snapshot"
// (every workspace, first), "workspace" (one created or changed),
// "workspace_deleted", and with ?workspace=: "sessions" (that workspace's
// sessions, first and whenever one changed: a command started or ended, a
// cwd moved).
type WorkspaceDeleted struct {
	ID string `json:"id"`
}
