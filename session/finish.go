package session

import (
	"strconv"
	"strings"
	"time"
)

// A command's end: its result made and kept, its files pruned.

// recentResults is how many results a session keeps in memory.
const recentResults = 16

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
