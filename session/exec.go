package session

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/patina-dev/patina/session/pty"
)

// Exec runs a command and waits for it. If ctx is cancelled first, the
// command is stopped as by Signal(SIGINT) and the result comes back with the
// context's error.
func (s *Session) Exec(ctx context.Context, req ExecRequest) (ExecResult, error) {
	c, err := s.startKind(req, kindUser)
	if err != nil {
		return ExecResult{}, err
	}
	select {
	case <-c.done:
		return c.res, nil
	case <-ctx.Done():
		_ = s.stop(c, syscall.SIGINT, false)
		select {
		case <-c.done:
			return c.res, ctx.Err()
		case <-s.gone:
			return ExecResult{}, fmt.Errorf("session %s: %w", s.id, ErrClosed)
		}
	case <-s.gone:
		return ExecResult{}, fmt.Errorf("session %s: %w (the command keeps running)", s.id, ErrClosed)
	}
}

// Start starts a command and returns its id at once. Wait, Command,
// ReadOutput and Follow take the id. The command is not tied to ctx.
func (s *Session) Start(ctx context.Context, req ExecRequest) (string, error) {
	c, err := s.startKind(req, kindUser)
	if err != nil {
		return "", err
	}
	return c.id, nil
}

// Wait waits for command id to finish and returns its result. Cancelling
// ctx stops the waiting, not the command. For a command that finished
// earlier (or before a reattach), the result is rebuilt from its files.
func (s *Session) Wait(ctx context.Context, id string) (ExecResult, error) {
	s.mu.Lock()
	c := s.cur
	res, recent := s.recentResult(id)
	s.mu.Unlock()
	if recent && (c == nil || c.id != id) {
		res.Stdout, res.Stderr = filesFor(s.dir, id).outputs(s.m.cfg.OutputLimit)
		return res, nil
	}
	if c != nil && c.id == id {
		select {
		case <-c.done:
			return c.res, nil
		case <-ctx.Done():
			return ExecResult{}, ctx.Err()
		case <-s.gone:
			return ExecResult{}, fmt.Errorf("session %s: %w", s.id, ErrClosed)
		}
	}
	ci, ok := s.hist.get(id)
	if !ok {
		return ExecResult{}, fmt.Errorf("command %s in session %s: %w", id, s.id, ErrNotFound)
	}
	return s.resultOf(ci), nil
}

// resultOf rebuilds the result of a finished command from history and files.
func (s *Session) resultOf(ci CommandInfo) ExecResult {
	res := ExecResult{
		CommandID:     ci.ID,
		ExitCode:      -1,
		TimedOut:      ci.TimedOut,
		Interrupted:   ci.Interrupted,
		Ended:         ci.Ended,
		ShellReplaced: ci.Replaced,
		StartedAt:     ci.StartedAt,
	}
	res.Stdout, res.Stderr = filesFor(s.dir, ci.ID).outputs(s.m.cfg.OutputLimit)
	if ci.ExitCode != nil {
		res.ExitCode = *ci.ExitCode
	}
	if ci.EndedAt != nil {
		res.EndedAt = *ci.EndedAt
	}
	return res
}

// Command returns command id's history record.
func (s *Session) Command(id string) (CommandInfo, error) {
	ci, ok := s.hist.get(id)
	if !ok {
		return CommandInfo{}, fmt.Errorf("command %s in session %s: %w", id, s.id, ErrNotFound)
	}
	if ci.State != CommandRunning && ci.StdoutBytes+ci.StderrBytes > 0 {
		f := filesFor(s.dir, id)
		if _, err := os.Stat(f.stdout); err != nil {
			if _, err := os.Stat(f.stderr); err != nil {
				ci.OutputPruned = true
			}
		}
	}
	return ci, nil
}

// History returns every command of the session, oldest first (for small
// sessions and tests: HistoryPage is bounded).
func (s *Session) History() []CommandInfo { return s.hist.all() }

// HistoryPage returns up to limit commands with ids above after, oldest
// first, and past the first no more than about maxBytes of them (0: no
// byte bound). Only a session's newest commands are kept in memory: older
// ones are read from its history file.
func (s *Session) HistoryPage(after uint64, limit, maxBytes int) []CommandInfo {
	return s.hist.page(after, limit, maxBytes)
}

// SetEnv exports env in the session's shell (and unsets the names in
// unset). It runs like a command, so it fails with ErrBusy while one runs;
// it does not appear in the history.
func (s *Session) SetEnv(ctx context.Context, env map[string]string, unset []string) error {
	var b strings.Builder
	if err := checkEnv(env); err != nil {
		return fmt.Errorf("set env: %w", err)
	}
	for _, k := range unset {
		if !ValidEnvName(k) {
			return fmt.Errorf("set env: %w: %q is not a valid variable name", ErrInvalid, k)
		}
		fmt.Fprintf(&b, `\builtin unset -v %s; `, k)
	}
	b.WriteString(exportScript(env))
	res, err := s.runInternal(ctx, b.String(), kindInternal)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("set env: %s", strings.TrimSpace(string(res.Stderr.Data)))
	}
	return nil
}

// runInternal runs text in the shell as a command of patina's own (no
// history) and waits for it; ctx ending stops it.
func (s *Session) runInternal(ctx context.Context, text string, kind cmdKind) (ExecResult, error) {
	c, err := s.startKind(ExecRequest{Command: text}, kind)
	if err != nil {
		return ExecResult{}, err
	}
	select {
	case <-c.done:
	case <-ctx.Done():
		_ = s.stop(c, syscall.SIGINT, false)
		<-c.done
		return c.res, ctx.Err()
	case <-s.gone:
		return ExecResult{}, fmt.Errorf("session %s: %w", s.id, ErrClosed)
	}
	if c.res.Ended {
		return c.res, s.endedErr()
	}
	return c.res, nil
}

func (s *Session) endedErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.endErr != nil {
		if s.state == StateClosed {
			return fmt.Errorf("session %s: %w", s.id, ErrClosed)
		}
		return s.endErr
	}
	return nil
}

// cmdKind says who runs a command: the user (numbered, in the history),
// patina itself (SetEnv), or a loan's state transfer (allowed while lent).
type cmdKind int

const (
	kindUser cmdKind = iota
	kindInternal
	kindLoan
)

// startKind writes the command's files and sends its line to the shell.
func (s *Session) startKind(req ExecRequest, kind cmdKind) (*command, error) {
	if strings.IndexByte(req.Command, 0) >= 0 {
		return nil, fmt.Errorf("exec: %w: command text contains a NUL byte", ErrInvalid)
	}
	if req.Timeout < 0 {
		return nil, fmt.Errorf("exec: %w: negative timeout", ErrInvalid)
	}
	if req.TTY != nil {
		if err := pty.ValidSize(req.TTY.Rows, req.TTY.Cols); err != nil {
			return nil, fmt.Errorf("exec: %w: %v", ErrInvalid, err)
		}
	}
	// The session is reserved (s.starting) under s.mu; the command is
	// prepared without it (the wait for its output files, its stdin file,
	// its terminal), so that another exec gets ErrBusy and a status call
	// its answer at once; then s.mu is taken again to start it.
	s.mu.Lock()
	if err := s.startable(kind); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	s.starting = true
	n := s.nextID
	job := s.prepared[n]
	flags := s.flags // a reattach's report may still set it
	s.mu.Unlock()
	c, line, err := s.prepareCommand(req, kind, n, job, flags)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.starting = false
	if err == nil {
		err = s.startable(kind) // closed or ended meanwhile
	}
	if err != nil {
		if c != nil {
			c.tty.close()
		}
		return nil, err
	}
	if err := s.send(c, req, line); err != nil {
		return nil, err
	}
	return c, nil
}

// startable says why a command of kind cannot start now (nil: it can).
// Called with s.mu held.
func (s *Session) startable(kind cmdKind) error {
	switch {
	case s.state == StateClosed || s.closing:
		return fmt.Errorf("session %s: %w", s.id, ErrClosed)
	case s.endErr != nil:
		return s.endErr
	case s.detached:
		return fmt.Errorf("session %s: %w", s.id, ErrClosed)
	case s.lent && kind != kindLoan:
		return fmt.Errorf("%w: a terminal is attached to session %s: leave it (exit, Ctrl-D or Ctrl-]) or use another session", ErrBusy, s.id)
	case s.starting:
		return fmt.Errorf("%w: session %s is starting a command: wait for it, or use another session", ErrBusy, s.id)
	case s.cur != nil:
		if s.cur.internal {
			return fmt.Errorf("%w: session %s is setting its environment: try again in a moment", ErrBusy, s.id)
		}
		return fmt.Errorf("%w: session %s is running command %s: wait for it, signal it, or use another session", ErrBusy, s.id, s.cur.id)
	}
	return nil
}

// prepareCommand makes command n's files ready (job: the making of its
// output files ahead, nil if none) and its wrapper line; flags are the
// shell's, read under s.mu. Called without s.mu, with the session
// reserved: s.dir does not change while no command runs.
func (s *Session) prepareCommand(req ExecRequest, kind cmdKind, n uint64, job *prepJob, flags string) (*command, string, error) {
	internal := kind != kindUser
	id := internalID
	clean := false // internal commands reuse their files: truncate them
	if !internal {
		id = strconv.FormatUint(n, 10)
		clean = s.waitPrepared(n, job)
	}
	f := filesFor(s.dir, id)
	text := req.Command
	if strings.Contains(flags, "e") {
		// The wrapper's "!" suspends inherited errexit; re-arm it for the
		// user's code (same line, so line numbers in messages stay right).
		text = `\builtin set -e; ` + text
	}
	var tty *ttyCopy
	if req.TTY != nil && !internal {
		var err error
		if tty, text, err = startTTY(f.stdout, *req.TTY, req.Stdin != nil, text); err != nil {
			return nil, "", fmt.Errorf("exec: %w", err)
		}
	}
	stdin := "/dev/null"
	if req.Stdin != nil {
		if err := os.WriteFile(f.stdin, req.Stdin, 0o644); err != nil {
			tty.close()
			return nil, "", fmt.Errorf("exec: %w", err)
		}
		stdin = f.stdin
	}
	line, err := wrapperLine(f, stdin, s.exits.path, id, text, !clean)
	if err != nil {
		tty.close()
		return nil, "", fmt.Errorf("exec: %w", err)
	}
	c := &command{
		id:       id,
		text:     req.Command,
		internal: internal,
		files:    f,
		started:  time.Now().UTC(),
		done:     make(chan struct{}),
		tty:      tty,
	}
	return c, line, nil
}

// send records c as the session's command and writes its line to the
// shell. Called with s.mu held.
func (s *Session) send(c *command, req ExecRequest, line string) error {
	internal, id, tty := c.internal, c.id, c.tty
	if s.lastStatus != 0 && !internal {
		line = fmt.Sprintf(statusPrefix, s.lastStatus) + line
	}
	if !internal {
		c.recovered, s.recovered = s.recovered, ""
		if err := s.hist.start(CommandInfo{ID: id, Command: req.Command, State: CommandRunning, StartedAt: c.started}); err != nil {
			tty.close()
			return err
		}
		s.nextID++
	}
	s.cur = c
	s.state = StateRunning
	if err := s.writeLine(line); err != nil {
		tty.close()
		s.cur = nil
		s.state = StateIdle
		if !internal {
			_ = s.hist.end(CommandInfo{ID: id, State: CommandLost, StartedAt: c.started, EndedAt: timePtr(time.Now().UTC())})
		}
		return err
	}
	if req.Timeout > 0 {
		c.timer = time.AfterFunc(req.Timeout, func() { _ = s.stop(c, syscall.SIGINT, true) })
	}
	return nil
}

// checkEnv refuses variables a shell cannot be given: a name that is not
// one, or a value with a NUL byte.
func checkEnv(env map[string]string) error {
	for k, v := range env {
		if !ValidEnvName(k) {
			return fmt.Errorf("%w: %q is not a valid variable name", ErrInvalid, k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("%w: the value of %s contains a NUL byte", ErrInvalid, k)
		}
	}
	return nil
}

// ValidEnvName reports whether k can be a shell variable name.
func ValidEnvName(k string) bool {
	if k == "" {
		return false
	}
	for i, r := range k {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
