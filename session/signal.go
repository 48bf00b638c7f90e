package session

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Signal sends sig to command id's foreground process tree. SIGINT, SIGTERM,
// SIGHUP, SIGQUIT and SIGKILL stop the command as a timeout does: the signal,
// a grace period, SIGKILL, and as a last resort a replacement shell; the
// shell abandons the rest of the command line and keeps its state. Other signals are only delivered. Signal returns once the
// first signal is sent; Wait returns the result.
func (s *Session) Signal(ctx context.Context, id string, sig syscall.Signal) error {
	s.mu.Lock()
	c := s.cur
	s.mu.Unlock()
	if c == nil || c.id != id || c.internal {
		if _, ok := s.hist.get(id); !ok {
			return fmt.Errorf("command %s in session %s: %w", id, s.id, ErrNotFound)
		}
		return fmt.Errorf("command %s in session %s: %w", id, s.id, ErrNotRunning)
	}
	switch sig {
	case syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGKILL:
		return s.stop(c, sig, false)
	}
	s.mu.Lock()
	shell := s.meta.ShellPID
	s.mu.Unlock()
	_, err := s.killtree(ctx, "stop", sigName(sig), "-", strconv.Itoa(shell))
	return err
}

// stop stops command c: sig to its foreground tree and SIGURG to the shell
// (which makes it abandon the command line once the tree is gone), then
// escalates in the background. It returns once the first signals are sent.
func (s *Session) stop(c *command, sig syscall.Signal, timeout bool) error {
	s.mu.Lock()
	if s.cur != c || c.stopping || s.endErr != nil {
		s.mu.Unlock()
		return nil
	}
	c.stopping = true
	c.settled = make(chan settle, 1)
	if timeout {
		c.timedOut = true
	} else {
		c.interrupted = true
	}
	s.syncSeq++
	c.syncK = s.syncSeq
	shell := strconv.Itoa(s.meta.ShellPID)
	s.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), stopSignalTimeout)
	defer cancel()
	tree, err := s.killtree(ctx, "stop", sigName(sig), "URG", shell)
	// Once the shell is back at its prompt it runs this and reports.
	if werr := s.writeLine(syncLine(c.syncK)); werr != nil && err == nil {
		err = werr
	}
	go s.escalate(c, shell, without(tree, shell))
	if err != nil {
		return fmt.Errorf("signal command %s: %w", c.id, err)
	}
	return nil
}

// escalate sees a stopped command to its end: it waits for the shell to
// come back to its prompt, SIGKILLs what is left of the command's tree (a
// process that ignores the first signal, such as a job the command put in
// the background), and finishes the command. If the shell does not come
// back, it SIGKILLs the tree, waits again, and replaces the shell.
func (s *Session) escalate(c *command, shell string, tree []string) {
	grace := s.m.cfg.InterruptGrace
	ctx, cancel := context.WithTimeout(context.Background(), escalateTimeout)
	defer cancel()
	if st, ok := s.waitSettled(c, grace); ok {
		s.finishStopped(ctx, c, st, tree)
		return
	}
	// The URG sent first is still pending in the shell if the command
	// outlived its signal; it fires once these children are gone.
	more, err := s.killtree(ctx, "stop", "KILL", "-", shell, c.startTick())
	if err != nil {
		s.log.Warn("kill command tree", "command_id", c.id, "err", err)
	}
	tree = append(tree, more...)
	if st, ok := s.waitSettled(c, grace/2); ok {
		s.finishStopped(ctx, c, st, tree)
		return
	}
	s.replace(ctx, c)
}

// waitSettled waits up to d for a stopping command's report.
func (s *Session) waitSettled(c *command, d time.Duration) (settle, bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case st := <-c.settled:
		return st, true
	case <-c.done: // the session ended
		return settle{}, true
	case <-s.gone:
		return settle{}, true
	case <-t.C:
		return settle{}, false
	}
}

// finishStopped kills what is left of a stopped command's tree, then
// finishes it with the status the shell reported.
func (s *Session) finishStopped(ctx context.Context, c *command, st settle, tree []string) {
	if len(tree) > 0 {
		if _, err := s.killtree(ctx, append([]string{"pids", "KILL"}, tree...)...); err != nil {
			s.log.Debug("kill leftover command processes", "command_id", c.id, "err", err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == c {
		s.finish(c, st.code, "")
	}
}

// without returns list without x.
func without(list []string, x string) []string {
	out := list[:0:0]
	for _, v := range list {
		if v != x {
			out = append(out, v)
		}
	}
	return out
}

// replace kills a shell that does not return to its prompt and has the
// supervisor start a new one, restored from the last state snapshot.
func (s *Session) replace(ctx context.Context, c *command) {
	s.mu.Lock()
	if s.cur != c || s.endErr != nil {
		s.mu.Unlock()
		return
	}
	c.replacing = true
	gen := s.meta.Generation + 1
	shell := strconv.Itoa(s.meta.ShellPID)
	snap := s.meta.Snapshot
	meta := s.meta
	s.mu.Unlock()

	s.log.Warn("shell does not respond to SIGINT; replacing it", "command_id", c.id, "generation", gen)
	if err := os.WriteFile(filepath.Join(s.dir, replaceFl), []byte(strconv.Itoa(gen)+"\n"), 0o644); err != nil {
		s.log.Error("replace shell", "err", err)
	}
	if _, err := s.killtree(ctx, "stop", "KILL", "KILL", shell, c.startTick()); err != nil {
		s.log.Warn("kill shell", "err", err)
	}
	var restore, notice string
	if snap != nil {
		restore = fmt.Sprintf(`\builtin source %s 2>/dev/null; `, shellQuote(snap.File))
		if snap.After == "" {
			notice = "the shell did not stop after SIGINT and SIGKILL of the command, so it was replaced; its state (cwd, environment, functions, aliases, options) was restored from the session's start"
		} else {
			notice = fmt.Sprintf("the shell did not stop after SIGINT and SIGKILL of the command, so it was replaced; its state (cwd, environment, functions, aliases, options) was restored as it was after command %s", snap.After)
		}
	} else {
		restore = createScript(meta)
		notice = "the shell did not stop after SIGINT and SIGKILL of the command, so it was replaced; its state was reset to the session's start (no snapshot had been taken yet)"
	}
	notice += "; background jobs keep running but are no longer in its job table"
	err := s.startShell(ctx, gen, restore)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != c {
		return
	}
	if err != nil {
		s.log.Error("replacement shell did not start", "err", err)
		s.endErr = &EndedError{Session: s.id, ExitCode: -1, Reason: "the shell had to be replaced and the replacement failed: " + err.Error()}
		s.state = StateEnded
		s.finish(c, 128+int(syscall.SIGKILL), notice)
		return
	}
	if err := s.exits.appendExit(c.id, 128+int(syscall.SIGKILL)); err != nil {
		s.log.Warn("record exit status", "err", err)
	}
	s.meta.Generation = gen
	s.finish(c, 128+int(syscall.SIGKILL), notice)
}

// killAll ends every process of the session: SIGHUP (an interactive bash
// passes it to its jobs), then SIGKILL.
func (s *Session) killAll(ctx context.Context) {
	s.mu.Lock()
	root := s.meta.SupervisorPID
	mark := s.meta.Marker
	s.mu.Unlock()
	rootArg := strconv.Itoa(root)
	if root == 0 {
		rootArg = "-1"
	}
	if _, err := s.killtree(ctx, "all", "HUP", rootArg, mark); err != nil {
		s.log.Debug("close: SIGHUP", "err", err)
	}
	select {
	case <-s.readerDone:
	case <-time.After(hangupWait):
	}
	if _, err := s.killtree(ctx, "all", "KILL", rootArg, mark); err != nil {
		s.log.Debug("close: SIGKILL", "err", err)
	}
}

// killtree runs killtreeScript through the Launcher.
func (s *Session) killtree(ctx context.Context, args ...string) ([]string, error) {
	argv := append([]string{s.m.cfg.Shell, "--noprofile", "--norc", "-c", killtreeScript, "killtree"}, args...)
	out, err := s.m.cfg.Launcher.Run(ctx, Process{Argv: argv})
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(out)), nil
}

// sigName is a signal's name as kill -s takes it.
func sigName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "INT"
	case syscall.SIGTERM:
		return "TERM"
	case syscall.SIGKILL:
		return "KILL"
	case syscall.SIGHUP:
		return "HUP"
	case syscall.SIGQUIT:
		return "QUIT"
	case syscall.SIGUSR1:
		return "USR1"
	case syscall.SIGUSR2:
		return "USR2"
	}
	return strconv.Itoa(int(sig))
}
