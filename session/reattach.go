package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// reattach adopts an existing session directory.
func reattach(_ context.Context, m *Manager, dir string) (*Session, error) {
	b, err := os.ReadFile(filepath.Join(dir, metaFile))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", metaFile, err)
	}
	var meta sessionMeta
	if err := json.Unmarshal(b, &meta); err != nil {
		return nil, fmt.Errorf("parse %s: %w", metaFile, err)
	}
	if meta.ID != filepath.Base(dir) {
		return nil, fmt.Errorf("%s names session %q, not %q", metaFile, meta.ID, filepath.Base(dir))
	}
	hist, err := openHistory(filepath.Join(dir, histFile))
	if err != nil {
		return nil, err
	}
	s := newSession(m, meta, dir, hist, nil, nil)
	s.nextID = hist.newest() + 1
	s.lastStatus = hist.lastExit()

	if meta.Closed {
		s.state = StateClosed
		s.detached = true
		s.endErr = &EndedError{Session: meta.ID, ExitCode: -1, Reason: "closed"}
		s.closeRunning(-1)
		hist.close()
		close(s.readerDone)
		return s, nil
	}

	status, err := os.OpenFile(filepath.Join(dir, statFIFO), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return s.markDead(fmt.Sprintf("status pipe: %v", err))
	}
	pre, alive, err := probe(status)
	if err != nil || !alive {
		status.Close()
		return s.markDead("every process of the session is gone")
	}
	in, err := os.OpenFile(filepath.Join(dir, inFIFO), os.O_RDWR, 0)
	if err != nil {
		status.Close()
		return s.markDead(fmt.Sprintf("command pipe: %v", err))
	}
	s.in, s.status = in, status
	s.cwd = meta.Cwd
	s.exits.skipToEnd()
	s.flags = ""

	// A command that was running when the previous Manager went away.
	if ci, ok := hist.last(); ok && ci.State == CommandRunning {
		c := &command{
			id:      ci.ID,
			text:    ci.Command,
			files:   filesFor(dir, ci.ID),
			started: ci.StartedAt,
			done:    make(chan struct{}),
		}
		s.cur = c
		s.state = StateRunning
		if code, ok := s.exits.find(c.id); ok {
			s.mu.Lock()
			s.finish(c, code, "")
			s.mu.Unlock()
		}
	}
	go s.readLoop(status, pre)
	// Learn the shell's flags and cwd (and, if a command was running, let
	// its report come first: this line queues behind it).
	s.mu.Lock()
	if s.cur == nil {
		s.syncSeq++
		_ = s.writeLine(syncLine(s.syncSeq))
	}
	s.mu.Unlock()
	s.log.Info("session reattached", "running", s.Info().Running)
	return s, nil
}

// probe reads whatever the status FIFO holds without blocking: alive is
// false when no process holds its write side any more.
func probe(f *os.File) (pre []byte, alive bool, err error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, false, err
	}
	buf := make([]byte, 64*1024)
	for {
		var n int
		var rerr error
		if err := rc.Read(func(fd uintptr) bool {
			n, rerr = syscall.Read(int(fd), buf)
			return true // never wait
		}); err != nil {
			return pre, false, err
		}
		switch {
		case n > 0:
			pre = append(pre, buf[:n]...)
		case n == 0 && rerr == nil:
			return pre, false, nil // EOF: no writers
		case errors.Is(rerr, syscall.EAGAIN):
			return pre, true, nil
		case errors.Is(rerr, syscall.EINTR):
		default:
			return pre, false, rerr
		}
	}
}

// markDead adopts a session whose processes are gone: it is ended, and a
// command that was running gets its status from its exit file if it wrote
// one.
func (s *Session) markDead(reason string) (*Session, error) {
	code := -1
	if b, err := os.ReadFile(filepath.Join(s.dir, exitFile)); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			code = n
			reason = "the shell exited"
		}
	}
	s.endErr = &EndedError{Session: s.id, ExitCode: code, Reason: reason, Outside: s.endedOutside()}
	s.state = StateEnded
	s.detached = true
	s.closeRunning(code)
	s.hist.close()
	s.exits.close()
	close(s.readerDone)
	return s, nil
}

// closeRunning records the end of a command left running in the history of
// a session that is no longer live.
func (s *Session) closeRunning(shellCode int) {
	ci, ok := s.hist.last()
	if !ok || ci.State != CommandRunning {
		return
	}
	f := filesFor(s.dir, ci.ID)
	code, ok := s.exits.find(ci.ID)
	if !ok {
		code = shellCode
	}
	ci.State = CommandFinished
	ci.Ended = true
	if code >= 0 {
		ci.ExitCode = intPtr(code)
	} else {
		ci.State = CommandLost
	}
	if st, err := os.Stat(s.exits.path); err == nil && code >= 0 {
		ci.EndedAt = timePtr(st.ModTime().UTC())
	} else {
		ci.EndedAt = timePtr(time.Now().UTC())
	}
	if st, err := os.Stat(f.stdout); err == nil {
		ci.StdoutBytes = st.Size()
	}
	if st, err := os.Stat(f.stderr); err == nil {
		ci.StderrBytes = st.Size()
	}
	if err := s.hist.end(ci); err != nil {
		s.log.Warn("history", "err", err)
	}
}
