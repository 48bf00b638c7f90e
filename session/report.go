package session

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// What the shell reports on its status pipe (a command done, a sync, its
// end), and the line written to it.

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
