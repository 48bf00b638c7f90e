package session

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Close ends the session: its shell and every process it started (its
// process tree, and processes that left the tree but carry the session's
// marker in their environment) get SIGHUP, then SIGKILL. A running command
// finishes with Ended set. The FIFOs are removed; history and output stay
// readable until Manager.Remove.
func (s *Session) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.state == StateClosed || s.closing {
		s.mu.Unlock()
		return fmt.Errorf("session %s: %w", s.id, ErrClosed)
	}
	if s.detached {
		s.mu.Unlock()
		return fmt.Errorf("session %s: %w", s.id, ErrClosed)
	}
	s.closing = true
	alreadyEnded := s.endErr != nil
	s.mu.Unlock()

	kctx, cancel := context.WithTimeout(ctx, closeTimeout)
	defer cancel()
	s.killAll(kctx)
	if !alreadyEnded {
		select {
		case <-s.readerDone:
		case <-time.After(closeEOFWait):
			// A descendant that escaped both the tree and the marker holds
			// the status FIFO: stop waiting for EOF.
			s.log.Warn("close: a process still holds the session's status pipe")
		case <-kctx.Done():
		}
	}
	s.onEnded(-1, "closed")

	s.mu.Lock()
	s.state = StateClosed
	s.meta.Closed = true
	s.meta.ClosedAt = time.Now().UTC()
	meta := s.meta
	s.mu.Unlock()
	s.teardown()
	for _, f := range []string{inFIFO, statFIFO, replaceFl} {
		_ = os.Remove(filepath.Join(s.dir, f))
	}
	if err := writeJSON(filepath.Join(s.dir, metaFile), meta); err != nil {
		return fmt.Errorf("close session %s: %w", s.id, err)
	}
	s.log.Info("session closed")
	return nil
}

// detach lets go of the session, leaving its processes running.
func (s *Session) detach() {
	s.mu.Lock()
	if s.detached {
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.teardown()
	close(s.gone)
}
