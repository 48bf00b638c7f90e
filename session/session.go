package session

import (
	"encoding/json"
	"log/slog"
	"os"
	"sync"
	"time"
)

// Session is one persistent shell. Its methods are safe for concurrent use;
// it runs one command at a time (a second Exec gets ErrBusy).
type Session struct {
	m    *Manager
	id   string
	dir  string
	log  *slog.Logger
	hist *history

	in     *os.File // command FIFO; opened read-write so opening never blocks
	status *os.File // status FIFO, read side

	readerDone chan struct{} // closed when the status reader returns
	gone       chan struct{} // closed when the Manager lets go (detach)

	mu         sync.Mutex
	meta       sessionMeta
	state      State
	cwd        string
	flags      string // the shell's $- after its last report
	nextID     uint64
	cur        *command
	exits      *exitsLog
	prepared   map[uint64]*prepJob // command -> the making of its output files
	lastStatus int                 // the user's last exit status, restored as $? before each command
	endErr     *EndedError
	ready      chan readyMsg
	detached   bool
	closing    bool
	lent       bool   // to a terminal (Lend)
	recovered  string // Recover's notice, for the next user command
	// starting: an exec has reserved the session and prepares its command
	// outside s.mu (waits for its output files, writes its stdin); other
	// execs get ErrBusy.
	starting bool

	// recent keeps the results of the last commands but their output (a
	// ring), so Wait after the fact returns what Exec would have (cwd,
	// notice...); the output is read again from the files.
	recent     []ExecResult
	recentNext int

	snapTimer   *time.Timer
	snapAt      time.Time // when the last snapshot was asked for
	snapSeq     uint64
	snapPending *snapshot
	dirty       bool
	syncSeq     uint64
}

// sessionMeta is session.json: what a new process needs to reattach.
type sessionMeta struct {
	ID        string            `json:"id"`
	CreatedAt time.Time         `json:"created_at"`
	Cwd       string            `json:"cwd,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	// Marker is an environment entry every process of the session inherits;
	// Close finds processes that left the process tree by it.
	Marker        string    `json:"marker"`
	SupervisorPID int       `json:"supervisor_pid,omitempty"`
	ShellPID      int       `json:"shell_pid,omitempty"`
	Generation    int       `json:"generation"`
	Snapshot      *snapshot `json:"snapshot,omitempty"`
	Closed        bool      `json:"closed,omitempty"`
	ClosedAt      time.Time `json:"closed_at,omitzero"`
}

// snapshot is a complete state dump.
type snapshot struct {
	Seq   uint64    `json:"seq"`
	File  string    `json:"file"`
	After string    `json:"after,omitempty"` // the last command before it
	At    time.Time `json:"at"`
}

// settle is the report that a stopping command is back at the prompt.
type settle struct{ code int }

type readyMsg struct {
	gen, sup, shell int
	flags, cwd      string
}

// command is a running command.
type command struct {
	id       string
	text     string
	internal bool
	files    cmdFiles
	started  time.Time
	done     chan struct{} // closed once res is set
	res      ExecResult

	// Guarded by Session.mu.
	timer       *time.Timer
	stopping    bool
	settled     chan settle // a stopping command's report goes here
	tree        []string    // what the first stop signal reached
	replacing   bool
	syncK       uint64
	timedOut    bool
	interrupted bool

	tty *ttyCopy // a TTY command's terminal

	recovered string // the notice of a shell Recover brought back for it
}

const (
	metaFile  = "session.json"
	inFIFO    = "in"
	statFIFO  = "status"
	histFile  = "history.jsonl"
	exitFile  = "shell.exit"
	exitsFile = "exits"
	shellLog  = "shell.log"
	replaceFl = "replace"
)

// ID returns the session's id.
func (s *Session) ID() string { return s.id }

// Dir returns the session's directory.
func (s *Session) Dir() string { return s.dir }

// Info describes the session.
func (s *Session) Info() Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	inf := Info{
		ID:           s.id,
		State:        s.state,
		Cwd:          s.cwd,
		CreatedAt:    s.meta.CreatedAt,
		Commands:     s.hist.len(),
		Replacements: s.meta.Generation,
	}
	if s.cur != nil && !s.cur.internal {
		inf.Running = s.cur.id
	}
	inf.Terminal = s.lent
	if s.endErr != nil {
		inf.ExitCode = intPtr(s.endErr.ExitCode)
		inf.EndReason = s.endErr.Reason
	}
	return inf
}

// teardown releases the session's descriptors (the processes are handled by
// the caller).
func (s *Session) teardown() {
	s.mu.Lock()
	s.detached = true
	if s.snapTimer != nil {
		s.snapTimer.Stop()
	}
	// Output files being prepared must not appear after the caller removes
	// the directory.
	for n, job := range s.prepared {
		<-job.done
		delete(s.prepared, n)
	}
	s.mu.Unlock()
	if s.status != nil {
		s.status.Close()
	}
	<-s.readerDone
	if s.in != nil {
		s.in.Close()
	}
	s.hist.close()
	s.exits.close()
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
