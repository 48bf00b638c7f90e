package inside

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sync"
	"syscall"
	"time"

	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/session/pty"
	"github.com/patina-dev/patina/sidecar/agent/wire"
	"github.com/patina-dev/patina/sidecar/mux"
)

// Terminals. A session's terminal is an interactive bash on a pseudo-
// terminal, started from the session's state and handing its state back
// when it ends (session.Lend). It outlives the connections that show it:
// a client that goes away without ending it can come back within
// TermLinger and resume its output by offset (the last TermKeep bytes are
// kept); once nobody has been attached for TermLinger, it is hung up.
const (
	defaultTermLinger = 60 * time.Second
	defaultTermKeep   = 1 << 20
	// termHangupGrace is how long a hung-up shell gets before SIGKILL.
	termHangupGrace = 5 * time.Second
	// termDrain is how long the terminal is read after its shell exited.
	termDrain = 200 * time.Millisecond
	// termInputWait bounds a write of input to a terminal whose program
	// does not read.
	termInputWait = 5 * time.Second
)

var termPattern = regexp.MustCompile(`^[A-Za-z0-9._+-]{1,64}$`)

// terminal is one session's terminal.
type terminal struct {
	s      *Server
	sid    string
	ready  chan struct{} // closed once started (or failed: err)
	err    error
	loan   *session.Loan
	cmd    *exec.Cmd
	master *os.File

	mu      sync.Mutex
	buf     []byte // output [start, end)
	start   int64
	end     int64
	changed chan struct{} // closed and replaced when output or state changes
	ended   bool
	exit    wire.TermExit
	clients int
	linger  *time.Timer
	hungUp  bool
}

func (s *Server) termAttach(st *mux.Stream, args json.RawMessage) error {
	var req wire.TermAttachRequest
	if err := decodeArgs(args, &req); err != nil {
		return err
	}
	if err := pty.ValidSize(req.Rows, req.Cols); err != nil {
		return fmt.Errorf("%w: %v", session.ErrInvalid, err)
	}
	if req.Offset < 0 {
		return fmt.Errorf("%w: negative offset", session.ErrInvalid)
	}
	if req.Term == "" {
		req.Term = "xterm-256color"
	}
	if !termPattern.MatchString(req.Term) {
		return fmt.Errorf("%w: term %q", session.ErrInvalid, req.Term)
	}
	t, started, err := s.terminalFor(req)
	if err != nil {
		return err
	}
	if !started {
		_ = pty.Resize(t.master, req.Rows, req.Cols)
	}
	off := t.join(req.Offset)
	defer t.leave()
	if err := wire.WriteHead(st, wire.TermAttachResult{Session: req.Session, Started: started, Offset: off}); err != nil {
		return nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		t.send(st, off)
	}()
	t.receive(st)
	<-done
	return nil
}

// terminalFor returns the session's running terminal, or starts one.
func (s *Server) terminalFor(req wire.TermAttachRequest) (*terminal, bool, error) {
	s.termMu.Lock()
	if t := s.terms[req.Session]; t != nil {
		s.termMu.Unlock()
		<-t.ready
		if t.err != nil {
			return nil, false, t.err
		}
		return t, false, nil
	}
	t := &terminal{s: s, sid: req.Session, ready: make(chan struct{}), changed: make(chan struct{})}
	s.terms[req.Session] = t
	s.termMu.Unlock()
	t.err = t.launch(req)
	if t.err != nil {
		s.termMu.Lock()
		delete(s.terms, req.Session)
		s.termMu.Unlock()
	}
	close(t.ready)
	if t.err != nil {
		return nil, false, t.err
	}
	return t, true, nil
}

// launch lends the session and starts its shell on a new terminal.
func (t *terminal) launch(req wire.TermAttachRequest) error {
	sess, err := t.s.sessions.Get(req.Session)
	if errors.Is(err, session.ErrNotFound) && req.Ensure {
		sess, err = t.s.ensure(wire.ExecRequest{Session: req.Session})
	}
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), sessionCallTimeout)
	defer cancel()
	loan, err := sess.Lend(ctx)
	if err != nil {
		return err
	}
	fail := func(err error) error {
		_ = loan.Return(ctx)
		return fmt.Errorf("start terminal: %w", err)
	}
	m, name, err := pty.Open()
	if err != nil {
		return fail(err)
	}
	if err := pty.Resize(m, req.Rows, req.Cols); err != nil {
		m.Close()
		return fail(err)
	}
	sl, err := pty.OpenSlave(name)
	if err != nil {
		m.Close()
		return fail(err)
	}
	defer sl.Close()
	cmd := exec.Command(loan.Shell, "--rcfile", loan.RCFile, "-i")
	cmd.Env = append(append(os.Environ(), loan.Env...), "TERM="+req.Term)
	if st, err := os.Stat(loan.Dir); err == nil && st.IsDir() {
		cmd.Dir = loan.Dir
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = sl, sl, sl
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		m.Close()
		return fail(err)
	}
	t.loan, t.cmd, t.master = loan, cmd, m
	readDone := make(chan struct{})
	go t.read(readDone)
	go t.wait(readDone)
	t.s.log.Info("terminal started", "session_id", t.sid, "pid", cmd.Process.Pid)
	return nil
}

// read copies the terminal's output into the buffer until it hangs up.
func (t *terminal) read(done chan struct{}) {
	defer close(done)
	buf := make([]byte, wire.MaxTermFrame)
	for {
		n, err := t.master.Read(buf)
		if n > 0 {
			t.appendOutput(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

func (t *terminal) appendOutput(p []byte) {
	keep := t.s.cfg.TermKeep
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	t.end += int64(len(p))
	if len(t.buf) > 2*keep {
		drop := len(t.buf) - keep
		t.buf = append([]byte(nil), t.buf[drop:]...)
		t.start += int64(drop)
	}
	t.wake()
}

// wake tells senders something changed. Called with t.mu held.
func (t *terminal) wake() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// wait waits for the shell, lets the last output in, hands the session
// back, and ends the terminal.
func (t *terminal) wait(readDone chan struct{}) {
	err := t.cmd.Wait()
	select {
	case <-readDone:
	case <-time.After(termDrain):
	}
	t.master.Close() // whatever else holds the terminal is hung up
	<-readDone
	exit := wire.TermExit{ExitCode: -1}
	var ee *exec.ExitError
	switch {
	case err == nil:
		exit.ExitCode = 0
	case errors.As(err, &ee):
		exit.ExitCode = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			exit.ExitCode = 128 + int(ws.Signal())
		}
	}
	t.mu.Lock()
	if t.hungUp {
		exit.Reason = "hung up"
	}
	if t.linger != nil {
		t.linger.Stop()
	}
	t.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), sessionCallTimeout)
	if rerr := t.loan.Return(ctx); rerr != nil {
		t.s.log.Warn("terminal: hand the session back", "session_id", t.sid, "err", rerr)
	}
	cancel()
	t.s.termMu.Lock()
	if t.s.terms[t.sid] == t {
		delete(t.s.terms, t.sid)
	}
	t.s.termMu.Unlock()
	t.mu.Lock()
	t.ended, t.exit = true, exit
	t.wake()
	t.mu.Unlock()
	t.s.log.Info("terminal ended", "session_id", t.sid, "exit_code", exit.ExitCode, "reason", exit.Reason)
}

// join counts a client in and returns where its output starts.
func (t *terminal) join(off int64) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.clients++
	if t.linger != nil {
		t.linger.Stop()
	}
	return min(max(off, t.start), t.end)
}

// leave counts a client out; the last one out starts the linger clock.
func (t *terminal) leave() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.clients--
	if t.clients > 0 || t.ended {
		return
	}
	linger := t.s.cfg.TermLinger
	if t.linger == nil {
		t.linger = time.AfterFunc(linger, t.lingered)
		return
	}
	t.linger.Reset(linger)
}

func (t *terminal) lingered() {
	t.mu.Lock()
	alone := t.clients == 0 && !t.ended
	t.mu.Unlock()
	if alone {
		t.hangup()
	}
}

// hangup ends the terminal as a real hangup does: the terminal goes (its
// master closed), so the kernel sends its shell SIGHUP (it hands its state
// back and hangs up its jobs) and its reads fail; SIGKILL to what is left
// of its process group after a grace. Not a SIGHUP of our own: one that
// lands just before bash blocks reading the terminal waits there unseen,
// and a second one while bash runs its exit trap kills it mid-way.
func (t *terminal) hangup() {
	t.mu.Lock()
	if t.hungUp || t.ended {
		t.mu.Unlock()
		return
	}
	t.hungUp = true
	t.mu.Unlock()
	pid := t.cmd.Process.Pid
	_ = t.master.Close()
	time.AfterFunc(termHangupGrace, func() {
		t.mu.Lock()
		ended := t.ended
		t.mu.Unlock()
		if !ended {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	})
}

// send streams output from off, then the exit, to one client.
func (t *terminal) send(st *mux.Stream, off int64) {
	for {
		t.mu.Lock()
		off = max(off, t.start)
		var frame []byte // the next output, framed here: one copy out of the buffer
		n := 0
		if off < t.end {
			i := int(off - t.start)
			chunk := t.buf[i:min(len(t.buf), i+wire.MaxTermFrame)]
			frame, n = wire.MakeFrame(wire.FrameOutput, chunk), len(chunk)
		}
		ended, exit, changed := t.ended, t.exit, t.changed
		t.mu.Unlock()
		switch {
		case frame != nil:
			if _, err := st.Write(frame); err != nil {
				return
			}
			off += int64(n)
			continue
		case ended:
			b, _ := json.Marshal(exit)
			_ = wire.WriteFrame(st, wire.FrameExit, b)
			_ = st.CloseWrite()
			return
		}
		select {
		case <-changed:
		case <-st.Done():
			return
		}
	}
}

// receive applies one client's input, resizes and end until it goes.
func (t *terminal) receive(st *mux.Stream) {
	r := bufio.NewReader(st)
	buf := make([]byte, wire.MaxTermFrame)
	for {
		typ, p, err := wire.ReadFrame(r, buf)
		if err != nil {
			return
		}
		switch typ {
		case wire.FrameInput:
			_ = t.master.SetWriteDeadline(time.Now().Add(termInputWait))
			_, _ = t.master.Write(p)
		case wire.FrameResize:
			if len(p) == 4 {
				_ = pty.Resize(t.master, int(binary.BigEndian.Uint16(p)), int(binary.BigEndian.Uint16(p[2:])))
			}
		case wire.FrameEnd:
			t.hangup()
		}
	}
}

// hangupAll ends every terminal (the agent is going away).
func (s *Server) hangupAll() {
	s.termMu.Lock()
	ts := make([]*terminal, 0, len(s.terms))
	for _, t := range s.terms {
		ts = append(ts, t)
	}
	s.termMu.Unlock()
	for _, t := range ts {
		select {
		case <-t.ready:
			if t.err == nil {
				t.hangup()
			}
		default:
		}
	}
}
