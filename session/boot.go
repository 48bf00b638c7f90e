package session

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Starting a session and its shell: the supervisor, the scripts a new
// shell runs first, and the shell itself.

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
