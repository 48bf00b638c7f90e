package session

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
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

// supervisorArgv is how the Launcher starts a session.
func (s *Session) supervisorArgv() []string {
	return []string{s.m.cfg.Shell, "--noprofile", "--norc", "-c", supervisorScript, "patina-session", s.dir, strconv.Itoa(s.meta.Generation)}
}

// launch creates the session directory and starts its shell.
func launch(ctx context.Context, m *Manager, req CreateRequest) (*Session, error) {
	dir := filepath.Join(m.cfg.Dir, req.ID)
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("%w: session %s exists already: use it, or choose another id", ErrExists, req.ID)
		}
		return nil, fmt.Errorf("create session %s: %w", req.ID, err)
	}
	fail := func(err error) (*Session, error) {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("create session %s: %w", req.ID, err)
	}
	if err := os.Mkdir(filepath.Join(dir, "c"), 0o755); err != nil {
		return fail(err)
	}
	marker, err := randomHex(16)
	if err != nil {
		return fail(err)
	}
	meta := sessionMeta{
		ID:        req.ID,
		CreatedAt: time.Now().UTC(),
		Cwd:       req.Cwd,
		Env:       req.Env,
		Marker:    "PATINA_SESSION_MARK=" + marker,
	}
	s, err := boot(ctx, m, dir, meta, createScript(meta))
	if err != nil {
		return fail(err)
	}
	return s, nil
}

// boot starts a shell for the session in dir: fresh FIFOs, the supervisor
// through the Launcher, then the init line with extra (the creation
// settings, or a state restore), waiting for ready. History and command
// numbering continue from what dir holds.
func boot(ctx context.Context, m *Manager, dir string, meta sessionMeta, extra string) (*Session, error) {
	for _, f := range []string{inFIFO, statFIFO} {
		p := filepath.Join(dir, f)
		_ = os.Remove(p)
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			return nil, fmt.Errorf("mkfifo %s: %w", f, err)
		}
	}
	for _, f := range []string{exitFile, replaceFl} {
		_ = os.Remove(filepath.Join(dir, f))
	}
	meta.SupervisorPID, meta.ShellPID = 0, 0
	if err := writeJSON(filepath.Join(dir, metaFile), meta); err != nil {
		return nil, err
	}
	status, err := os.OpenFile(filepath.Join(dir, statFIFO), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	// Until the supervisor holds the status FIFO, a reader would see EOF:
	// hold a writer ourselves until the shell reports ready.
	hold, err := os.OpenFile(filepath.Join(dir, statFIFO), os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		status.Close()
		return nil, err
	}
	defer hold.Close()
	in, err := os.OpenFile(filepath.Join(dir, inFIFO), os.O_RDWR, 0)
	if err != nil {
		status.Close()
		return nil, err
	}
	hist, err := openHistory(filepath.Join(dir, histFile))
	if err != nil {
		status.Close()
		in.Close()
		return nil, err
	}
	s := newSession(m, meta, dir, hist, in, status)
	s.nextID = hist.newest() + 1
	s.lastStatus = hist.lastExit()
	s.exits.skipToEnd()
	s.prepareAhead(s.nextID, nil)
	s.prepareAhead(s.nextID+1, nil)
	s.cwd = meta.Cwd
	go s.readLoop(status, nil)

	env := append(m.baseEnv(), "PATINA_SESSION_ID="+meta.ID, meta.Marker)
	if err := m.cfg.Launcher.Start(ctx, Process{Argv: s.supervisorArgv(), Env: env, Dir: meta.Cwd}); err != nil {
		s.teardown()
		return nil, err
	}
	if err := s.startShell(ctx, meta.Generation, extra); err != nil {
		// Whatever started must not linger.
		s.killAll(context.Background())
		s.teardown()
		return nil, err
	}
	return s, nil
}

func newSession(m *Manager, meta sessionMeta, dir string, hist *history, in, status *os.File) *Session {
	return &Session{
		m:          m,
		id:         meta.ID,
		dir:        dir,
		log:        m.log.With("session_id", meta.ID),
		hist:       hist,
		in:         in,
		status:     status,
		meta:       meta,
		state:      StateIdle,
		readerDone: make(chan struct{}),
		gone:       make(chan struct{}),
		ready:      make(chan readyMsg, 4),
		exits:      &exitsLog{path: filepath.Join(dir, exitsFile)},
	}
}

// createScript is what a fresh shell runs before reporting ready: the
// requested cwd and environment.
func createScript(meta sessionMeta) string {
	var b strings.Builder
	if meta.Cwd != "" {
		fmt.Fprintf(&b, `\builtin cd -- %s; `, shellQuote(meta.Cwd))
	}
	b.WriteString(exportScript(meta.Env))
	return b.String()
}

// exportScript exports env (names are validated by the caller), sorted for
// determinism.
func exportScript(env map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(env)) {
		fmt.Fprintf(&b, `\builtin export %s=%s; `, k, shellQuote(env[k]))
	}
	return b.String()
}

// startShell sends the init line to a new shell of generation gen and waits
// for it to report ready.
func (s *Session) startShell(ctx context.Context, gen int, extra string) error {
	// Drop stale ready messages.
	for len(s.ready) > 0 {
		<-s.ready
	}
	if err := s.writeLine(initLine(gen, extra)); err != nil {
		return err
	}
	t := time.NewTimer(s.m.cfg.StartTimeout)
	defer t.Stop()
	for {
		select {
		case r := <-s.ready:
			if r.gen != gen {
				continue
			}
			s.mu.Lock()
			s.meta.Generation = gen
			s.meta.SupervisorPID = r.sup
			s.meta.ShellPID = r.shell
			s.flags = r.flags
			s.cwd = r.cwd
			meta := s.meta
			s.mu.Unlock()
			return writeJSON(filepath.Join(s.dir, metaFile), meta)
		case <-s.readerDone:
			return fmt.Errorf("shell exited during start: %s", s.shellLogTail())
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return fmt.Errorf("shell did not report ready within %s: %s", s.m.cfg.StartTimeout, s.shellLogTail())
		}
	}
}

// shellLogTail is the end of the shell's own stderr, for error messages.
func (s *Session) shellLogTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, shellLog))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var keep []string
	for _, l := range lines {
		if strings.Contains(l, "job control") || strings.Contains(l, "terminal process group") || l == "" {
			continue
		}
		keep = append(keep, l)
	}
	if len(keep) > 5 {
		keep = keep[len(keep)-5:]
	}
	if len(keep) == 0 {
		return "no output from the shell"
	}
	return strings.Join(keep, "; ")
}

// writeLine sends one line to the shell. A line is written whole (lines stay
// below PIPE_BUF), and never blocks for long: the FIFO is drained by the
// shell between commands, and we write at most a few lines ahead.
func (s *Session) writeLine(line string) error {
	if err := s.in.SetWriteDeadline(time.Now().Add(lineWriteWait)); err != nil {
		return fmt.Errorf("session %s: %w", s.id, err)
	}
	if _, err := io.WriteString(s.in, line); err != nil {
		return fmt.Errorf("session %s: write to shell: %w", s.id, err)
	}
	return nil
}

// readLoop reads the shell's reports until the status FIFO reaches EOF
// (every session process is gone) or the Manager lets go.
func (s *Session) readLoop(r io.Reader, pre []byte) {
	defer close(s.readerDone)
	if len(pre) > 0 {
		r = io.MultiReader(strings.NewReader(string(pre)), r)
	}
	br := bufio.NewReaderSize(r, 512) // reports are short lines; a longer one is read in pieces
	for {
		line, err := br.ReadString('\n')
		if strings.HasSuffix(line, "\n") {
			s.handle(strings.TrimSuffix(line, "\n"))
		}
		if err != nil {
			s.mu.Lock()
			detached := s.detached
			s.mu.Unlock()
			if !detached {
				s.onEnded(-1, "every process of the session is gone")
			}
			return
		}
	}
}

// handle dispatches one report line.
func (s *Session) handle(line string) {
	f := strings.SplitN(line, " ", 2)
	rest := ""
	if len(f) == 2 {
		rest = f[1]
	}
	switch f[0] {
	case "ready": // GEN SUP SHELL FLAGS CWD
		p := strings.SplitN(rest, " ", 5)
		if len(p) < 4 {
			return
		}
		var r readyMsg
		r.gen, _ = strconv.Atoi(p[0])
		r.sup, _ = strconv.Atoi(p[1])
		r.shell, _ = strconv.Atoi(p[2])
		r.flags = p[3]
		if len(p) == 5 {
			r.cwd = p[4]
		}
		select {
		case s.ready <- r:
		default:
		}
	case "done": // ID FLAGS CWD
		p := strings.SplitN(rest, " ", 3)
		if len(p) < 3 {
			return
		}
		s.onDone(p[0], p[1], p[2])
	case "sync": // K STATUS FLAGS CWD
		p := strings.SplitN(rest, " ", 4)
		if len(p) < 4 {
			return
		}
		k, _ := strconv.ParseUint(p[0], 10, 64)
		code, _ := strconv.Atoi(p[1])
		s.onSync(k, code, p[2], p[3])
	case "snap":
		k, _ := strconv.ParseUint(rest, 10, 64)
		s.onSnap(k)
	case "ended":
		code, err := strconv.Atoi(rest)
		if err != nil {
			code = -1
		}
		s.onEnded(code, "")
	default:
		s.log.Debug("unexpected report from shell", "line", line)
	}
}

func (s *Session) onDone(id, flags, cwd string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cur
	if c == nil || c.id != id || c.replacing {
		return
	}
	if c.tty != nil {
		// Let the terminal's last bytes reach the output file first.
		s.mu.Unlock()
		c.tty.finish(ttyDrain)
		s.mu.Lock()
		if s.cur != c || c.replacing {
			return
		}
	}
	s.setWhere(flags, cwd)
	code, ok := s.exits.next(c.id)
	if !ok {
		code = -1
	}
	if c.stopping {
		c.settle(code)
		return
	}
	// The output's head and tail (up to OutputLimit each) are read without
	// s.mu: a status call or a second exec does not wait behind them.
	// s.cur stays c meanwhile, so the session stays busy. (A terminal's
	// copy is closed first, under s.mu: finish reads its output then.)
	if c.tty != nil {
		s.finish(c, code, "")
		return
	}
	s.mu.Unlock()
	stdout, stderr := c.files.outputs(s.m.cfg.OutputLimit)
	s.mu.Lock()
	if s.cur != c || c.replacing || c.stopping {
		if s.cur == c && c.stopping {
			c.settle(code)
		}
		return
	}
	s.finishWith(c, code, "", stdout, stderr)
}

// setWhere keeps the shell's flags and cwd from a report. They are
// substrings of the report's line: kept as they are, each would hold its
// whole line in memory (and every remembered result one more), so an
// unchanged value keeps the string it had and a new one is copied. Called
// with s.mu held.
func (s *Session) setWhere(flags, cwd string) {
	if flags != s.flags {
		s.flags = strings.Clone(flags)
	}
	if cwd != s.cwd {
		s.cwd = strings.Clone(cwd)
	}
}

// settle hands a stopping command's status to its escalation, which ends
// what is left of its process tree before finishing it.
func (c *command) settle(code int) {
	select {
	case c.settled <- settle{code: code}:
	default:
	}
}

func (s *Session) onSync(k uint64, code int, flags, cwd string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cur
	if c == nil || c.syncK != k || c.replacing {
		if c == nil && k == s.syncSeq {
			s.setWhere(flags, cwd) // a reattach asking where the shell is
		}
		return
	}
	s.setWhere(flags, cwd)
	// The command line was aborted before it could record its status.
	if err := s.exits.appendExit(c.id, code); err != nil {
		s.log.Warn("record exit status", "err", err)
	}
	c.settle(code)
}

// onEnded records that the shell has ended; reason "" means the supervisor
// reported it.
func (s *Session) onEnded(code int, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.endErr != nil || s.detached {
		return
	}
	if code < 0 {
		if b, err := os.ReadFile(filepath.Join(s.dir, exitFile)); err == nil {
			if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				code = n
			}
		}
	}
	c := s.cur
	switch {
	case s.closing:
		reason = "closed"
	case reason != "":
	case c != nil && !c.internal:
		reason = fmt.Sprintf("command %s ended the shell: %s", c.id, summarize(c.text))
	default:
		reason = "the shell exited"
	}
	notRun := !s.closing && c != nil && !c.internal && s.diedBefore(c)
	if notRun {
		reason = fmt.Sprintf("the shell was killed before command %s reached it", c.id)
	}
	s.endErr = &EndedError{Session: s.id, ExitCode: code, Reason: reason, Outside: !s.closing && (c == nil || c.internal || notRun)}
	if s.closing {
		s.state = StateClosed
	} else {
		s.state = StateEnded
	}
	switch {
	case c != nil && notRun:
		s.finish(c, -1, fmt.Sprintf("command %s did not run: the session's shell had been killed from outside before it arrived; run it again (the session's next command restores its state)", c.id))
	case c != nil:
		if code >= 0 {
			if err := s.exits.appendExit(c.id, code); err != nil {
				s.log.Warn("record exit status", "err", err)
			}
		}
		s.finish(c, code, "")
	}
	if s.snapTimer != nil {
		s.snapTimer.Stop()
	}
	s.log.Info("session ended", "exit_code", code, "reason", reason)
}

// finish completes c with the given status, reading its output. Called
// with s.mu held.
func (s *Session) finish(c *command, code int, notice string) {
	stdout, stderr := c.files.outputs(s.m.cfg.OutputLimit)
	s.finishWith(c, code, notice, stdout, stderr)
}

// finishWith completes c with the given status and output. Called with
// s.mu held.
func (s *Session) finishWith(c *command, code int, notice string, stdout, stderr Output) {
	if c.timer != nil {
		c.timer.Stop()
	}
	c.tty.close()
	now := time.Now().UTC()
	res := ExecResult{
		CommandID:     c.id,
		ExitCode:      code,
		Stdout:        stdout,
		Stderr:        stderr,
		TimedOut:      c.timedOut,
		Interrupted:   c.interrupted,
		Ended:         s.endErr != nil || s.closing, // Close killed it
		ShellReplaced: c.replacing || c.recovered != "",
		Notice:        joinNotices(c.recovered, notice),
		Cwd:           s.cwd,
		StartedAt:     c.started,
		EndedAt:       now,
	}
	c.res = res
	s.remember(res)
	s.cur = nil
	if s.endErr == nil && !s.closing {
		s.state = StateIdle
	}
	if !c.internal {
		ci := CommandInfo{
			ID:          c.id,
			Command:     c.text,
			State:       CommandFinished,
			StartedAt:   c.started,
			EndedAt:     timePtr(now),
			StdoutBytes: res.Stdout.Size,
			StderrBytes: res.Stderr.Size,
			TimedOut:    c.timedOut,
			Interrupted: c.interrupted,
			Ended:       res.Ended,
			Replaced:    c.replacing || c.recovered != "",
		}
		if code >= 0 {
			ci.ExitCode = intPtr(code)
		} else {
			ci.State = CommandLost
		}
		if err := s.hist.end(ci); err != nil {
			s.log.Warn("history", "err", err)
		}
		if code >= 0 {
			s.lastStatus = code
		}
		// The next command's files are ready (prepared while this one ran);
		// prepare the one after while it runs, and prune old ones then
		// too: neither delays this result.
		s.prepareAhead(s.nextID+1, s.pruned(c.id))
	}
	s.dirty = true
	s.scheduleSnapshot()
	close(c.done)
}

// recentResults is how many results a session keeps in memory.
const recentResults = 16

// remember keeps res, without its output, among the recent results.
// Called with s.mu held.
func (s *Session) remember(res ExecResult) {
	res.Stdout.Data, res.Stdout.Tail = nil, nil
	res.Stderr.Data, res.Stderr.Tail = nil, nil
	for i := range s.recent {
		if s.recent[i].CommandID == res.CommandID {
			s.recent[i] = res
			return
		}
	}
	if len(s.recent) < recentResults {
		s.recent = append(s.recent, res)
		return
	}
	s.recent[s.recentNext] = res
	s.recentNext = (s.recentNext + 1) % recentResults
}

// recentResult is command id's remembered result, without its output.
// Called with s.mu held.
func (s *Session) recentResult(id string) (ExecResult, bool) {
	for _, res := range s.recent {
		if res.CommandID == id {
			return res, true
		}
	}
	return ExecResult{}, false
}

// pruned is the files that fall beyond KeepOutputs once command id has
// finished (nil: none).
func (s *Session) pruned(id string) *cmdFiles {
	n, err := strconv.ParseUint(id, 10, 64)
	keep := uint64(s.m.cfg.KeepOutputs)
	if err != nil || n <= keep {
		return nil
	}
	f := s.files(n - keep)
	return &f
}

// prepJob is the making of a command's output files.
type prepJob struct {
	done  chan struct{} // closed when it is over
	clean bool          // both files are known to be empty (set before done)
}

// prepareAhead makes command n's output files in the background (two
// commands ahead of the one that just finished, so the work overlaps the
// next command instead of delaying it), and deletes prune's (if any). Called with s.mu held (or before
// the session is shared); teardown waits for it.
func (s *Session) prepareAhead(n uint64, prune *cmdFiles) {
	if s.prepared == nil {
		s.prepared = map[uint64]*prepJob{}
	}
	if _, ok := s.prepared[n]; ok {
		return
	}
	for k, j := range s.prepared { // jobs a command stopped waiting for, now over
		select {
		case <-j.done:
			if k < n-1 {
				delete(s.prepared, k)
			}
		default:
		}
	}
	job := &prepJob{done: make(chan struct{})}
	s.prepared[n] = job
	next := s.files(n)
	hook := s.m.cfg.prepareHook
	go func() {
		defer close(job.done)
		if hook != nil {
			hook()
		}
		job.clean = prepareOutputs(next)
		if prune != nil {
			prune.removeOutput()
		}
	}()
}

// waitPrepared waits (up to Config.PrepareWait) for command n's output
// files, being made by job (nil: none is), and reports whether both are
// known to be empty; if they are late, the shell creates them itself (and
// truncates them: not clean). Called without s.mu, with the session
// reserved (s.starting).
func (s *Session) waitPrepared(n uint64, job *prepJob) (clean bool) {
	if job == nil {
		return prepareOutputs(s.files(n))
	}
	t := time.NewTimer(s.m.cfg.PrepareWait)
	defer t.Stop()
	select {
	case <-job.done:
		s.mu.Lock()
		if s.prepared[n] == job {
			delete(s.prepared, n)
		}
		s.mu.Unlock()
		return job.clean
	case <-t.C:
		return false // the job stays listed: teardown waits for it
	}
}

// files returns the files of command n.
func (s *Session) files(n uint64) cmdFiles {
	return filesFor(s.dir, strconv.FormatUint(n, 10))
}

// summarize shortens a command for messages.
func summarize(text string) string {
	t := strings.TrimSpace(text)
	if i := strings.IndexByte(t, '\n'); i >= 0 {
		t = t[:i] + " ..."
	}
	if len(t) > 60 {
		t = t[:57] + "..."
	}
	return strconv.Quote(t)
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
