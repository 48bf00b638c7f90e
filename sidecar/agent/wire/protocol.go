package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/sidecar/mux"
)

// Methods of the protocol.
const (
	MethodHello         = "hello"
	MethodSessionCreate = "session.create"
	MethodSessionList   = "session.list"
	MethodSessionGet    = "session.get"
	MethodSessionRemove = "session.remove"
	MethodSessionRevive = "session.revive"
	MethodSessionEnv    = "session.env"
	MethodSessionFlush  = "session.flush"
	MethodHistory       = "session.history"
	MethodCommand       = "command.get"
	MethodExec          = "exec"
	MethodWait          = "wait"
	MethodSignal        = "signal"
	MethodOutput        = "output"
	MethodFileRead      = "file.read"
	MethodFileList      = "file.list"
	MethodFileWrite     = "file.write"
	MethodFileDelete    = "file.delete"
	MethodGitInit       = "git.init"
	MethodGitState      = "git.state"
	MethodGitCommit     = "git.commit"
	MethodGitPack       = "git.pack"
	MethodGitHas        = "git.has"
	MethodGitReceive    = "git.receive"
	MethodPortDial      = "port.dial"
	MethodTermAttach    = "term.attach"
	MethodSetup         = "setup"
)

// ProtocolVersion is sent in hello. Version 2: an exec result's output
// follows its line as raw bytes (Output), and mux windows start at
// mux.InitialWindow.
const ProtocolVersion = 2

// OldProtocol is the protocol of the agents of earlier patina releases,
// spoken only to a workspace whose container such a release made
// (agent.ClientConfig.OldAgent): output inline in the result line,
// base64, and every mux window Window (sidecar/agent/compat.go).
const OldProtocol = 1

// SocketName is the abstract unix socket the agent listens on, in its
// container's network namespace.
const SocketName = "@patina-agent"

// TokenEnv carries the agent's token from the sidecar (docker exec's
// environment, or the container's for its init, which hands it on to the
// agent it starts); the agent and its init take it out of their
// environment (and out of /proc/<pid>/environ) before anything else.
const TokenEnv = "PATINA_AGENT_TOKEN"

// Limits of the protocol, on both sides.
const (
	// MaxHistoryPage is the most history records one call returns, and
	// HistoryPageBytes about the most bytes (at least one record).
	MaxHistoryPage   = 1000
	HistoryPageBytes = 2 << 20
	// MaxListEntries is the most entries a directory listing returns.
	MaxListEntries = 50_000
	// maxMessage bounds an error message and other free text from the peer.
	maxMessage = 8 << 10
)

// PortDialTimeout bounds the agent's connecting to a port inside the
// workspace (the sidecar waits that long and a little more).
const PortDialTimeout = 5 * time.Second

// Call is a stream header.
type Call struct {
	Method string          `json:"m"`
	Args   json.RawMessage `json:"a,omitempty"`
}

// Head is one line of an answer: a progress note (ID), the result (R) or
// the error (E). The last line has R or E.
type Head struct {
	ID string          `json:"id,omitempty"`
	R  json.RawMessage `json:"r,omitempty"`
	E  *Error          `json:"e,omitempty"`
}

// Error is an error as it crosses the wire.
type Error struct {
	Code     string `json:"code"`
	Msg      string `json:"msg"`
	ExitCode *int   `json:"exit_code,omitempty"` // "ended"
	Reason   string `json:"reason,omitempty"`    // "ended"
	Session  string `json:"session,omitempty"`   // "ended"
}

// Error codes on the wire.
const (
	CodeNotFound     = "not_found"
	CodeExists       = "exists"
	CodeBusy         = "busy"
	CodeEnded        = "ended"
	CodeClosed       = "closed"
	CodeNotRunning   = "not_running"
	CodeInvalid      = "invalid"
	CodeLocked       = "locked"
	CodeEscapes      = "escapes"
	CodeTooLarge     = "too_large"
	CodeUnauthorized = "unauthorized"
	CodeConflict     = "conflict"
	CodeNotListening = "not_listening"
	CodeInternal     = "internal"
)

// The errors that cross the wire, besides session's sentinels (ErrNotFound,
// ErrBusy, ErrEnded as *session.EndedError, ...), which cross it as
// themselves.
var (
	// ErrEscapes: a file path leaves the workspace (by .. or a symlink).
	ErrEscapes = errors.New("path escapes the workspace")
	// ErrTooLarge: a file or body over the limit.
	ErrTooLarge = errors.New("too large")
	// ErrConflict: a git operation inside the workspace could not be done
	// as asked (e.g. no commit to record).
	ErrConflict = errors.New("conflict")
	// ErrNotListening: nothing listens on the port asked for inside the
	// workspace.
	ErrNotListening = errors.New("nothing listens on that port in the workspace")
	// ErrUnauthorized: the agent refused the sidecar's token (or
	// workspace) in hello. The sidecar's client reports it as its agent
	// being unavailable.
	ErrUnauthorized = errors.New("the agent refused the sidecar's token")
)

// wireCodes pairs each wire code with the sentinel it stands for, both
// ways; "ended" (a *session.EndedError) and "unauthorized" are apart.
var wireCodes = []struct {
	code string
	err  error
}{
	{CodeNotFound, session.ErrNotFound},
	{CodeExists, session.ErrExists},
	{CodeBusy, session.ErrBusy},
	{CodeClosed, session.ErrClosed},
	{CodeNotRunning, session.ErrNotRunning},
	{CodeInvalid, session.ErrInvalid},
	{CodeLocked, session.ErrLocked},
	{CodeEscapes, ErrEscapes},
	{CodeTooLarge, ErrTooLarge},
	{CodeConflict, ErrConflict},
	{CodeNotListening, ErrNotListening},
}

// EncodeError turns an error into its wire form (the agent's side).
func EncodeError(err error) *Error {
	we := &Error{Code: CodeInternal, Msg: err.Error()}
	var ended *session.EndedError
	if errors.As(err, &ended) {
		code := ended.ExitCode
		we.Code, we.ExitCode, we.Reason, we.Session = CodeEnded, &code, ended.Reason, ended.Session
		return we
	}
	for _, c := range wireCodes {
		if errors.Is(err, c.err) {
			we.Code = c.code
			break
		}
	}
	return we
}

// DecodeError turns a wire error back into an error wrapping the matching
// sentinel (the sidecar's side). The message is the agent's: untrusted
// text, shortened and made printable.
func DecodeError(we *Error) error {
	msg := CleanText(we.Msg, maxMessage)
	switch we.Code {
	case CodeEnded:
		code := -1
		if we.ExitCode != nil && *we.ExitCode >= -1 && *we.ExitCode <= 255 {
			code = *we.ExitCode
		}
		sid := we.Session
		if session.ValidateID(sid) != nil {
			sid = "?"
		}
		return &session.EndedError{Session: sid, ExitCode: code, Reason: CleanText(we.Reason, 1024)}
	case CodeUnauthorized:
		return fmt.Errorf("%w: %s", ErrUnauthorized, msg)
	}
	for _, c := range wireCodes {
		if c.code == we.Code {
			// The agent's message starts with the sentinel's text, which the
			// wrapping repeats: say it once.
			return fmt.Errorf("%w: %s", c.err, strings.TrimPrefix(msg, c.err.Error()+": "))
		}
	}
	return fmt.Errorf("agent: %s", msg)
}

// CleanText makes text from the peer safe to show: valid UTF-8, no control
// characters but newline and tab, at most max bytes.
func CleanText(s string, max int) string {
	if len(s) > max {
		s = s[:max]
		for len(s) > 0 && !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "…"
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\n' && r != '\t' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// HelloRequest opens a connection.
type HelloRequest struct {
	Token       string `json:"token"`
	WorkspaceID string `json:"workspace_id"`
	Protocol    int    `json:"protocol"`
}

// Hello is the agent's answer: who it is.
type Hello struct {
	WorkspaceID string    `json:"workspace_id"`
	Protocol    int       `json:"protocol"`
	Version     string    `json:"version"`
	PID         int       `json:"pid"`
	StartedAt   time.Time `json:"started_at"`
	// Sessions is how many sessions the agent found at its start, and
	// Live how many of them still had a shell.
	Sessions int `json:"sessions"`
	Live     int `json:"live"`
}

// CreateSessionRequest creates a session.
type CreateSessionRequest struct {
	ID  string            `json:"id,omitempty"`
	Cwd string            `json:"cwd,omitempty"`
	Env map[string]string `json:"env,omitempty"`
}

// SetupRequest is what the sidecar gives a workspace's agent after hello,
// on every connection (so a new agent has it before any other call): the
// environment added to every shell started from then on, and a CA its
// TLS clients are to trust. Nothing of it goes into the container's
// configuration.
type SetupRequest struct {
	Env   map[string]string `json:"env,omitempty"`
	Trust *TrustSetup       `json:"trust,omitempty"`
}

// TrustSetup is a CA for the workspace's trust store: the agent writes it
// (PEM) at CAPath, and at BundlePath the image's own roots followed by
// it; then Env (the variables that name them) is added to the shells'
// environment too.
type TrustSetup struct {
	CA         string            `json:"ca"`
	CAPath     string            `json:"ca_path"`
	BundlePath string            `json:"bundle_path"`
	Env        map[string]string `json:"env,omitempty"`
}

// SetupResult says what could not be done.
type SetupResult struct {
	Warning string `json:"warning,omitempty"`
}

// SessionRef names a session (session.get, session.remove).
type SessionRef struct {
	Session string `json:"sid"`
}

// ReviveRequest gives ended sessions a new shell with their last state.
type ReviveRequest struct {
	// Session names one; empty: every ended session.
	Session string `json:"sid,omitempty"`
	// Fresh starts the named session's new shell with its creation
	// settings instead of its last state (after the session's own command
	// ended it); its history and command ids go on.
	Fresh bool `json:"fresh,omitempty"`
}

// SetEnvRequest exports (and unsets) variables in a session.
type SetEnvRequest struct {
	Session string            `json:"sid"`
	Env     map[string]string `json:"env,omitempty"`
	Unset   []string          `json:"unset,omitempty"`
}

// HistoryRequest reads a page of a session's commands.
type HistoryRequest struct {
	Session string `json:"sid"`
	After   uint64 `json:"after,omitempty"` // command ids after this one
	Limit   int    `json:"limit,omitempty"`
}

// CommandRef names a command of a session (command.get, wait).
type CommandRef struct {
	Session string `json:"sid"`
	Command string `json:"cid"`
}

// ExecRequest runs a command in a session. The command's stdin, if any,
// is the stream's body.
type ExecRequest struct {
	Session string `json:"sid"`
	Command string `json:"command"`
	// TimeoutMS stops the command after this long (0: never).
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// Stdin says the body is the command's stdin (else it reads EOF).
	Stdin bool `json:"stdin,omitempty"`
	// Async returns the command's id at once.
	Async bool `json:"async,omitempty"`
	// TTY runs the command on a terminal of that size.
	TTY *session.TTY `json:"tty,omitempty"`
	// Ensure creates the session (in Cwd) if it does not exist.
	Ensure bool   `json:"ensure,omitempty"`
	Cwd    string `json:"cwd,omitempty"`
}

// Output is one stream of an ExecResult (session.Output on the wire):
// its sizes only. The bytes follow the result's line, raw, in the order
// stdout's head, stdout's tail, stderr's head, stderr's tail (DataLen and
// TailLen bytes each), and the stream ends after them.
type Output struct {
	DataLen   int   `json:"data_len,omitempty"`
	TailLen   int   `json:"tail_len,omitempty"`
	Size      int64 `json:"size"`
	Truncated bool  `json:"truncated,omitempty"`
}

// ExecResult is session.ExecResult on the wire (the output's bytes follow
// it: see Output).
type ExecResult struct {
	CommandID     string    `json:"command_id"`
	ExitCode      int       `json:"exit_code"`
	Stdout        Output    `json:"stdout"`
	Stderr        Output    `json:"stderr"`
	TimedOut      bool      `json:"timed_out,omitempty"`
	Interrupted   bool      `json:"interrupted,omitempty"`
	Ended         bool      `json:"ended,omitempty"`
	ShellReplaced bool      `json:"shell_replaced,omitempty"`
	Notice        string    `json:"notice,omitempty"`
	Cwd           string    `json:"cwd,omitempty"`
	StartedAt     time.Time `json:"started_at"`
	EndedAt       time.Time `json:"ended_at"`
}

// ExecResultOf is r's line and the bytes that follow it.
func ExecResultOf(r session.ExecResult) (ExecResult, [][]byte) {
	out := func(o session.Output) Output {
		return Output{DataLen: len(o.Data), TailLen: len(o.Tail), Size: o.Size, Truncated: o.Truncated}
	}
	return ExecResult{
		CommandID: r.CommandID, ExitCode: r.ExitCode, Stdout: out(r.Stdout), Stderr: out(r.Stderr),
		TimedOut: r.TimedOut, Interrupted: r.Interrupted, Ended: r.Ended, ShellReplaced: r.ShellReplaced,
		Notice: r.Notice, Cwd: r.Cwd, StartedAt: r.StartedAt, EndedAt: r.EndedAt,
	}, [][]byte{r.Stdout.Data, r.Stdout.Tail, r.Stderr.Data, r.Stderr.Tail}
}

// BodyLen is how many bytes follow the result's line.
func (r ExecResult) BodyLen() int64 {
	return int64(r.Stdout.DataLen) + int64(r.Stdout.TailLen) + int64(r.Stderr.DataLen) + int64(r.Stderr.TailLen)
}

// Session converts back to the session package's type, with the bytes
// that followed the line (parts as ExecResultOf made them).
func (r ExecResult) Session(parts [4][]byte) session.ExecResult {
	out := func(o Output, data, tail []byte) session.Output {
		return session.Output{Data: data, Tail: tail, Size: o.Size, Truncated: o.Truncated}
	}
	return session.ExecResult{
		CommandID: r.CommandID, ExitCode: r.ExitCode,
		Stdout: out(r.Stdout, parts[0], parts[1]), Stderr: out(r.Stderr, parts[2], parts[3]),
		TimedOut: r.TimedOut, Interrupted: r.Interrupted, Ended: r.Ended, ShellReplaced: r.ShellReplaced,
		Notice: r.Notice, Cwd: r.Cwd, StartedAt: r.StartedAt, EndedAt: r.EndedAt,
	}
}

// AsyncResult is the answer to an exec with Async: the command's id.
type AsyncResult struct {
	CommandID string `json:"command_id"`
}

// SignalRequest sends a signal to a running command.
type SignalRequest struct {
	Session string `json:"sid"`
	Command string `json:"cid"`
	Signal  string `json:"signal"`
}

// OutputRequest reads a command's output from Offset: up to Limit bytes
// (0: to the current end), or live until the command ends with Follow.
type OutputRequest struct {
	Session string `json:"sid"`
	Command string `json:"cid"`
	Stream  string `json:"stream"`
	Offset  int64  `json:"offset"`
	Limit   int64  `json:"limit,omitempty"`
	Follow  bool   `json:"follow,omitempty"`
}

// OutputHead precedes a command's output bytes.
type OutputHead struct {
	// Size is the stream's size when the command has finished (-1 while it
	// runs).
	Size int64 `json:"size"`
}

// FileRequest names a file under /workspace.
type FileRequest struct {
	Path string `json:"path"`
}

// FileInfo describes a file or directory entry.
type FileInfo struct {
	Name    string    `json:"name"`
	Type    string    `json:"type"` // file, dir, symlink, other
	Size    int64     `json:"size"`
	Mode    uint32    `json:"mode"` // fs.FileMode bits
	ModTime time.Time `json:"mod_time"`
}

// FileWriteRequest writes a file from the stream's body.
type FileWriteRequest struct {
	Path string `json:"path"`
	// Max is the most bytes the body may hold.
	Max int64 `json:"max"`
}

// FileHead precedes a file's bytes.
type FileHead struct {
	FileInfo
	// Dir is set instead when the path names a directory: its listing
	// follows as the result, no body.
	Entries []FileInfo `json:"entries,omitempty"`
	IsDir   bool       `json:"is_dir,omitempty"`
}

// FileWriteResult says what a write did.
type FileWriteResult struct {
	Size    int64 `json:"size"`
	Created bool  `json:"created"`
}

// GitInitRequest makes /workspace the workspace's own repository.
type GitInitRequest struct {
	Branch     string   `json:"branch"`
	Base       string   `json:"base"`
	Alternates []string `json:"alternates,omitempty"`
	KeepFiles  bool     `json:"keep_files,omitempty"`
	Rename     bool     `json:"rename,omitempty"`
	Reseed     bool     `json:"reseed,omitempty"`
	UserName   string   `json:"user_name,omitempty"`
	UserEmail  string   `json:"user_email,omitempty"`
}

// GitState is where the workspace's repository is.
type GitState struct {
	Head     string `json:"head"`
	Branch   string `json:"branch,omitempty"`
	Snapshot string `json:"snapshot,omitempty"`
	Dirty    bool   `json:"dirty,omitempty"`
}

// GitCommitRequest commits everything uncommitted in the workspace.
type GitCommitRequest struct {
	Message     string `json:"message"`
	AuthorName  string `json:"author_name,omitempty"`
	AuthorEmail string `json:"author_email,omitempty"`
}

// GitCommitResult says what a commit did.
type GitCommitResult struct {
	Commit    string `json:"commit"`
	Committed bool   `json:"committed"`
}

// GitStore is the store of objects shipped to a workspace whose engine is
// on another machine than the user's repository: whether it has the
// commit asked about, and its object directory, the alternate its
// repository borrows from (a path in the workspace).
type GitStore struct {
	Has     bool   `json:"has"`
	Objects string `json:"objects"`
}

// GitStoreRequest names a commit of the store of shipped objects.
type GitStoreRequest struct {
	Commit string `json:"commit"`
}

// GitPackRequest asks for a pack of what Want reaches and Have does not.
type GitPackRequest struct {
	Want []string `json:"want"`
	Have []string `json:"have,omitempty"`
}

// PortDialRequest opens a tunnel to a TCP port inside the workspace: after
// the answer, the stream carries the connection's bytes both ways.
type PortDialRequest struct {
	Port int `json:"port"`
}

// PortDialResult says where the agent connected (for logs).
type PortDialResult struct {
	Addr string `json:"addr"`
}

// ValidPort checks a TCP port number.
func ValidPort(port int) error {
	if port < 1 || port > 65535 {
		return fmt.Errorf("%w: port must be between 1 and 65535, got %d", session.ErrInvalid, port)
	}
	return nil
}

// TermAttachRequest attaches to a session's terminal, starting one (the
// session lent to it) if it has none.
type TermAttachRequest struct {
	Session string `json:"sid"`
	Rows    int    `json:"rows"`
	Cols    int    `json:"cols"`
	// Offset is where to resume the output of a terminal already running
	// (bytes since it started); output older than what is kept is skipped.
	Offset int64 `json:"offset,omitempty"`
	// Term is the terminal type for TERM (default xterm-256color).
	Term string `json:"term,omitempty"`
	// Ensure creates the session if it does not exist ("default").
	Ensure bool `json:"ensure,omitempty"`
}

// TermAttachResult is the head of a terminal stream.
type TermAttachResult struct {
	Session string `json:"sid"`
	// Started: this attach started the terminal.
	Started bool `json:"started"`
	// Offset is where the output that follows starts.
	Offset int64 `json:"offset"`
}

// TermExit is how a terminal ended.
type TermExit struct {
	// ExitCode is its shell's exit status (128+N for signal N; -1 unknown).
	ExitCode int `json:"exit_code"`
	// Reason says why it ended when it was not its shell's own choice.
	Reason string `json:"reason,omitempty"`
}

// ResultLine is the head line of an answer carrying v: {"r": v} and a
// newline.
func ResultLine(v any) ([]byte, error) {
	r, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(Head{R: r})
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// WriteHead answers with v and leaves the stream open for a body.
func WriteHead(st *mux.Stream, v any) error {
	b, err := ResultLine(v)
	if err != nil {
		return err
	}
	_, err = st.Write(b)
	return err
}
