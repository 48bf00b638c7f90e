package session

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"
)

// State snapshots. After a command, once the session has been idle for
// SnapshotDelay, the shell dumps its state (builtins only) into state.0 or
// state.1 in turn; a replacement shell sources the last complete one. The
// dump costs about 0.4 ms of shell time, which is why it waits for idleness
// instead of following every command.

// snapshotMinGap is the least time between two snapshots of a session:
// a session kept busy (a command every few tens of ms) would otherwise
// pay a dump after nearly every command. A session used now and then
// still has its snapshot SnapshotDelay after each command.
const snapshotMinGap = time.Second

// scheduleSnapshot (re)arms the snapshot timer: SnapshotDelay from now,
// but not sooner than snapshotMinGap after the last snapshot. Called with
// s.mu held.
func (s *Session) scheduleSnapshot() {
	if s.detached || s.endErr != nil {
		return
	}
	delay := max(s.m.cfg.SnapshotDelay, snapshotMinGap-time.Since(s.snapAt))
	if s.snapTimer == nil {
		s.snapTimer = time.AfterFunc(delay, s.takeSnapshot)
		return
	}
	s.snapTimer.Reset(delay)
}

func (s *Session) takeSnapshot() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != StateIdle || !s.dirty || s.detached || s.endErr != nil || s.cur != nil {
		return
	}
	s.snapSeq++
	k := s.snapSeq
	after := ""
	if n := s.hist.newest(); n > 0 {
		after = strconv.FormatUint(n, 10)
	}
	sn := &snapshot{Seq: k, File: filepath.Join(s.dir, fmt.Sprintf("state.%d", k%2)), After: after}
	line := snapshotLine(sn.File, k)
	if err := s.writeLine(line); err != nil {
		s.log.Warn("snapshot", "err", err)
		return
	}
	s.snapPending = sn
	s.snapAt = time.Now()
	s.dirty = false
}

func (s *Session) onSnap(k uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn := s.snapPending
	if sn == nil || sn.Seq != k {
		return
	}
	s.snapPending = nil
	sn.At = time.Now().UTC()
	s.meta.Snapshot = sn
	if err := writeJSON(filepath.Join(s.dir, metaFile), s.meta); err != nil {
		s.log.Warn("snapshot: write session.json", "err", err)
	}
}

// FlushSnapshots snapshots at once every idle session whose state changed
// since its last snapshot, and waits (while ctx lasts) until they are
// written: a workspace about to stop keeps its last commands' state.
func (m *Manager) FlushSnapshots(ctx context.Context) {
	ss := m.all()
	for _, s := range ss {
		s.takeSnapshot()
	}
	t := time.NewTicker(flushPoll)
	defer t.Stop()
	for _, s := range ss {
		for {
			s.mu.Lock()
			pending := s.snapPending != nil && !s.detached && s.endErr == nil
			s.mu.Unlock()
			if !pending {
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}
}
