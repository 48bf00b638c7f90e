package session

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// A session's shell can die without any command of its own ending it:
// `kill -9 -1` or `pkill bash` in another session, the OOM killer. Such a
// session is not ended for good, as after `exit` or `kill -9 $$` in the
// session itself: its next command brings it back from its last state
// snapshot (Recover), as a wedged shell is replaced. A session that its
// own command ended starts again only when asked (Restart), with its
// creation settings; either way its history and command ids go on.

// endedOutside reports, for a session adopted with no live process,
// whether its shell died while no command of its own was running (the
// newest command neither running nor ending the shell). Called before
// closeRunning.
func (s *Session) endedOutside() bool {
	ci, ok := s.hist.last()
	return !ok || (ci.State != CommandRunning && !ci.Ended)
}

// Recover gives session id a new shell restored from its last snapshot
// when something outside the session killed its shell (see
// EndedError.Outside), and returns the session to run in and a notice
// saying what happened ("" when the session was usable as it was). A
// session that ended any other way is returned as it is: using it
// reports ErrEnded.
func (m *Manager) Recover(ctx context.Context, id string) (*Session, string, error) {
	s, err := m.Get(id)
	if err != nil {
		return nil, "", err
	}
	if s.Info().State == StateIdle && s.shellExited() {
		// Its shell is gone but the supervisor's report is on its way:
		// wait for it rather than send a command to no shell.
		select {
		case <-s.readerDone:
		case <-time.After(endReportWait):
		}
	}
	if !s.endedFromOutside() {
		return s, "", nil
	}
	m.recovering.Lock()
	defer m.recovering.Unlock()
	if s, err = m.Get(id); err != nil || !s.endedFromOutside() {
		return s, "", err // a concurrent caller recovered it
	}
	s.mu.Lock()
	why, snap := s.endErr.Reason, s.meta.Snapshot
	s.mu.Unlock()
	ns, err := m.revive(ctx, id, false)
	if err != nil {
		return nil, "", err
	}
	notice := fmt.Sprintf("session %s's shell was killed from outside the session (%s: kill -9 -1 or pkill in another session, or the out-of-memory killer, say), so this command runs in a new shell", id, why)
	switch {
	case snap == nil:
		notice += " with the session's start settings (no state snapshot had been taken yet)"
	case snap.After == "":
		notice += " restored from the session's start (cwd, environment, functions, aliases, options)"
	default:
		notice += fmt.Sprintf(" restored as it was after command %s (cwd, environment, functions, aliases, options)", snap.After)
	}
	notice += "; processes the old shell started are gone from its job table"
	ns.mu.Lock()
	ns.recovered = notice
	ns.mu.Unlock()
	return ns, notice, nil
}

// Restart gives session id, whose shell has ended (exit, exec, a fatal
// signal), a new shell with the session's creation settings (cwd and
// environment; the old shell's variables and functions are not kept).
// Its history and command numbering go on. A live session is returned as
// it is; a closed one cannot be restarted (ErrClosed).
func (m *Manager) Restart(ctx context.Context, id string) (*Session, error) {
	m.recovering.Lock()
	defer m.recovering.Unlock()
	return m.revive(ctx, id, true)
}

// endReportWait bounds the wait for the report of a shell that has exited
// (the supervisor writes shell.exit, then reports): microseconds, unless
// the machine is very busy.
const endReportWait = 2 * time.Second

// shellExited reports whether the shell is gone: its process no longer
// exists (when the Launcher starts processes in this process's pid
// namespace: a signal 0 answers ESRCH), or the supervisor has recorded its
// exit (shell.exit exists: boot removes it). A signal and a stat, cheap
// enough for every command.
func (s *Session) shellExited() bool {
	s.mu.Lock()
	pid := s.meta.ShellPID
	s.mu.Unlock()
	if _, local := s.m.cfg.Launcher.(LocalLauncher); local && pid > 0 && syscall.Kill(pid, 0) == syscall.ESRCH {
		return true
	}
	_, err := os.Stat(filepath.Join(s.dir, exitFile))
	return err == nil
}

// diedBefore reports whether the shell had already exited when command c
// was sent to it (shell.exit is older than c): then c never ran, and the
// shell was not ended by it. Called with s.mu held, from onEnded.
func (s *Session) diedBefore(c *command) bool {
	st, err := os.Stat(filepath.Join(s.dir, exitFile))
	return err == nil && st.ModTime().Before(c.started.Add(-fileClockSlack))
}

// fileClockSlack is how far a file's modification time may lag the clock
// that stamped a command's start: the kernel stamps files from its coarse
// clock, up to a timer tick behind (10 ms at HZ=100). A shell that a
// command such as `exit 4` ends a millisecond after it was sent must not
// look as if it had died before the command; the cost is that a shell
// killed from outside less than this before a command arrived is blamed
// on that command.
const fileClockSlack = 10 * time.Millisecond

// endedFromOutside reports whether the session's shell ended with no
// command of its own to blame (EndedError.Outside).
func (s *Session) endedFromOutside() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state == StateEnded && s.endErr != nil && s.endErr.Outside
}

// joinNotices joins the notices a result carries ("" left out).
func joinNotices(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}
