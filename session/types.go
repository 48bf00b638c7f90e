package session

import (
	"log/slog"
	"time"
)

// Config configures a Manager. Zero values take the defaults noted.
type Config struct {
	// Dir holds one directory per session. Required. It must be visible at
	// the same path wherever the Launcher runs the shell.
	Dir string
	// Launcher starts shells and runs helper commands. Required.
	Launcher Launcher
	// Logger receives structured logs (default: discard).
	Logger *slog.Logger
	// Shell is the bash binary as the Launcher sees it (default "bash").
	Shell string
	// Env is added to every session's environment ("K=V" entries).
	Env []string
	// OutputLimit caps how much of each stream an ExecResult carries: the
	// first OutputLimit bytes and the last OutputLimit bytes when the output
	// is larger (default 1 MiB). The whole output stays on disk.
	OutputLimit int
	// StartTimeout bounds how long a new shell may take to report ready
	// (default 15 s).
	StartTimeout time.Duration
	// InterruptGrace is how long a stopped command gets after SIGINT before
	// SIGKILL, and the shell after SIGKILL before it is replaced
	// (default 500 ms).
	InterruptGrace time.Duration
	// SnapshotDelay is how long a session must be idle before its state is
	// snapshotted for restoring a replacement shell (default 20 ms).
	SnapshotDelay time.Duration
	// KeepOutputs is how many commands' output files a session keeps; older
	// ones are deleted (their history records stay). Default 1000.
	KeepOutputs int
	// PrepareWait is how long an exec waits for its output files, made
	// ahead while the session was idle, before it lets the shell create
	// them (and truncate them) itself: the making is one or two system
	// calls, late only on a stalled filesystem (default 1 s). The session
	// is reserved meanwhile, not locked: another exec gets ErrBusy and a
	// status call its answer at once.
	PrepareWait time.Duration

	// prepareHook, when set (by tests), runs before a command's output
	// files are made ahead.
	prepareHook func()
}

// CreateRequest creates a session.
type CreateRequest struct {
	// ID names the session: 1-64 of [A-Za-z0-9._-], not starting with '.'
	// or '-'. Empty: generated.
	ID string
	// Cwd is the shell's starting directory (default: the Launcher's).
	Cwd string
	// Env is exported in the new shell.
	Env map[string]string
}

// ExecRequest runs one command.
type ExecRequest struct {
	// Command is bash text: any number of lines; it runs in the session's
	// shell, so cd, export, functions and options persist. It may not
	// contain NUL bytes.
	Command string
	// Stdin is what the command reads on standard input; nil: EOF at once.
	Stdin []byte
	// Timeout stops the command (SIGINT, grace, SIGKILL) after this long;
	// zero: no limit.
	Timeout time.Duration
	// TTY runs the command on a terminal of that size: its stdout and
	// stderr (and its stdin, unless Stdin is given) are the terminal, so
	// it sees isatty true and the window size; what it prints, with the
	// terminal's line endings (CR LF), is its stdout. It runs in a subshell
	// of the session: it sees the session's cwd, variables, functions and
	// aliases, but changes it makes to them are not kept.
	TTY *TTY
}

// TTY is a terminal's size, and its type.
type TTY struct {
	Rows int `json:"rows"`
	Cols int `json:"cols"`
	// Term is TERM for the command (empty: the session's own).
	Term string `json:"term,omitempty"`
}

// Stream names an output stream.
type Stream string

// The output streams.
const (
	Stdout Stream = "stdout"
	Stderr Stream = "stderr"
)

// Output is one captured stream in an ExecResult.
type Output struct {
	// Data is the whole output, or its first OutputLimit bytes when
	// Truncated.
	Data []byte
	// Tail is the last OutputLimit bytes when Truncated, else nil.
	Tail []byte
	// Size is the stream's total size in bytes.
	Size int64
	// Truncated says Data and Tail do not hold all of it; ReadOutput and
	// Follow read the rest.
	Truncated bool
}

// ExecResult is the outcome of a command.
type ExecResult struct {
	CommandID string
	// ExitCode is the command's status: 0-255, 128+N when signal N ended it.
	ExitCode int
	Stdout   Output
	Stderr   Output
	// TimedOut: the request's Timeout stopped the command.
	TimedOut bool
	// Interrupted: Signal (or a cancelled context) stopped the command.
	Interrupted bool
	// Ended: the shell ended during the command (exit, exec, set -e, a
	// fatal signal); the session accepts no more commands.
	Ended bool
	// ShellReplaced: the shell did not return to its prompt after SIGINT and
	// SIGKILL (e.g. a busy loop with SIGINT trapped), so it was killed and a
	// new one started with the state snapshotted before the command.
	// Notice says what was restored.
	ShellReplaced bool
	Notice        string
	// Cwd is the shell's working directory after the command.
	Cwd       string
	StartedAt time.Time
	EndedAt   time.Time
}

// Duration is how long the command ran.
func (r ExecResult) Duration() time.Duration { return r.EndedAt.Sub(r.StartedAt) }

// CommandState is where a command is in its life.
type CommandState string

// Command states.
const (
	CommandRunning  CommandState = "running"
	CommandFinished CommandState = "finished"
	// CommandLost: the session's shell vanished (container removed, session
	// killed from outside) before the command reported its status.
	CommandLost CommandState = "lost"
)

// CommandInfo is a command's history record.
type CommandInfo struct {
	ID          string       `json:"id"`
	Command     string       `json:"command"`
	State       CommandState `json:"state"`
	StartedAt   time.Time    `json:"started_at"`
	EndedAt     *time.Time   `json:"ended_at,omitempty"`
	ExitCode    *int         `json:"exit_code,omitempty"`
	StdoutBytes int64        `json:"stdout_bytes"`
	StderrBytes int64        `json:"stderr_bytes"`
	TimedOut    bool         `json:"timed_out,omitempty"`
	Interrupted bool         `json:"interrupted,omitempty"`
	Ended       bool         `json:"ended,omitempty"`
	Replaced    bool         `json:"shell_replaced,omitempty"`
	// OutputPruned: the output files were deleted (KeepOutputs).
	OutputPruned bool `json:"output_pruned,omitempty"`
}

// State is a session's state.
type State string

// Session states.
const (
	StateIdle    State = "idle"
	StateRunning State = "running"
	StateEnded   State = "ended"
	StateClosed  State = "closed"
)

// Info describes a session.
type Info struct {
	ID        string    `json:"id"`
	State     State     `json:"state"`
	Cwd       string    `json:"cwd"`
	CreatedAt time.Time `json:"created_at"`
	// Running is the id of the running command, if any.
	Running string `json:"running,omitempty"`
	// Commands counts the commands run so far.
	Commands int `json:"commands"`
	// ExitCode is the shell's exit status once ended (-1: unknown).
	ExitCode *int `json:"exit_code,omitempty"`
	// EndReason says how the session ended.
	EndReason string `json:"end_reason,omitempty"`
	// Replacements counts shells replaced after a wedge.
	Replacements int `json:"replacements,omitempty"`
	// Terminal: the session is lent to a terminal (Lend); commands get
	// ErrBusy until it ends.
	Terminal bool `json:"terminal,omitempty"`
}
