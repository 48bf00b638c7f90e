package session

import (
	"strconv"
	"time"
)

// Each command's output files, made a command ahead, off the exec's path.

// prepJob is the making of a command's output files.
type prepJob struct {
	done  chan struct{} // closed when it is over
	clean bool          // both files are known to be empty (set before done)
}

// prepareAhead makes command n's output files in the background (two
// commands ahead of the one that just finished, so the work overlaps the
// next command instead of delaying it), and deletes prune's (if any). Called with s.mu held (or before
// the session is shared); teardown waits for it.
func (s *Session) prepareAhead(n uint64, prune *cmdFiles) {
	if s.prepared == nil {
		s.prepared = map[uint64]*prepJob{}
	}
	if _, ok := s.prepared[n]; ok {
		return
	}
	for k, j := range s.prepared { // jobs a command stopped waiting for, now over
		select {
		case <-j.done:
			if k < n-1 {
				delete(s.prepared, k)
			}
		default:
		}
	}
	job := &prepJob{done: make(chan struct{})}
	s.prepared[n] = job
	next := s.files(n)
	hook := s.m.cfg.prepareHook
	go func() {
		defer close(job.done)
		if hook != nil {
			hook()
		}
		job.clean = prepareOutputs(next)
		if prune != nil {
			prune.removeOutput()
		}
	}()
}

// waitPrepared waits (up to Config.PrepareWait) for command n's output
// files, being made by job (nil: none is), and reports whether both are
// known to be empty; if they are late, the shell creates them itself (and
// truncates them: not clean). Called without s.mu, with the session
// reserved (s.starting).
func (s *Session) waitPrepared(n uint64, job *prepJob) (clean bool) {
	if job == nil {
		return prepareOutputs(s.files(n))
	}
	t := time.NewTimer(s.m.cfg.PrepareWait)
	defer t.Stop()
	select {
	case <-job.done:
		s.mu.Lock()
		if s.prepared[n] == job {
			delete(s.prepared, n)
		}
		s.mu.Unlock()
		return job.clean
	case <-t.C:
		return false // the job stays listed: teardown waits for it
	}
}

// files returns the files of command n.
func (s *Session) files(n uint64) cmdFiles {
	return filesFor(s.dir, strconv.FormatUint(n, 10))
}
