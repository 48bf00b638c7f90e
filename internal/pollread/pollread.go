// Package pollread reads a pipe or FIFO that is about to receive a reply by
// polling it for a short while instead of sleeping.
//
// A process that sleeps on a pipe is woken by the writer: the writer's
// system call then wakes a task on another CPU, and on a virtual machine
// whose idle CPUs halt (this project's machines: cpuidle haltpoll with no
// guest polling) that costs the writer tens of microseconds, and the
// reader as long again before it runs. On a short command's round trip
// through patina (client, sidecar, agent, shell and back) such wake-ups
// are most of the time. A Reader told that a reply is due (Expect) polls
// for it, yielding the CPU to anything else runnable at every turn, for
// at most the time given; otherwise, and after that, it waits in the
// runtime's poller as any read does. One Reader of a Gate polls at a time.
package pollread

import (
	"errors"
	"io"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Gate lets one Reader poll at a time, and only while a single operation
// that awaits a reply is in flight (Begin, End): share one across the
// Readers of a process (or of a part of it), so that polling takes at most
// one CPU, and none when the process is busy with several requests (then
// a wait is short anyway, and the CPU is better spent on the work).
type Gate struct {
	busy   atomic.Int32 // a Reader polls
	active atomic.Int32 // operations in flight
}

// Begin counts an operation in flight until End.
func (g *Gate) Begin() { g.active.Add(1) }

// End ends an operation that Begin counted.
func (g *Gate) End() { g.active.Add(-1) }

// State says whether a Reader polls now, and how many operations Begin
// counts.
func (g *Gate) State() (polling bool, inFlight int32) {
	return g.busy.Load() != 0, g.active.Load()
}

// Reader reads f (a pipe or FIFO in non-blocking mode, as os.Pipe and
// os.OpenFile of a FIFO give) and polls it after Expect.
type Reader struct {
	f     *os.File
	rc    syscall.RawConn
	gate  *Gate
	until atomic.Int64 // unix nanoseconds; 0: do not poll
	woken atomic.Bool  // Expect set a deadline in the past
}

// New returns a Reader of f, which owns f's read deadline from then on. If
// f cannot be polled (not in non-blocking
// mode), the Reader reads it plainly.
func New(f *os.File, gate *Gate) *Reader {
	r := &Reader{f: f, gate: gate}
	if rc, err := f.SyscallConn(); err == nil {
		r.rc = rc
	}
	return r
}

// Expect makes the Reader poll for up to d from now, if a single operation
// of its Gate is in flight: a Read that waits already is woken (through a
// read deadline in the past) and polls. Expect does not block.
func (r *Reader) Expect(d time.Duration) {
	if r.rc == nil || d <= 0 || r.gate.active.Load() > 1 {
		return
	}
	r.until.Store(time.Now().Add(d).UnixNano())
	r.woken.Store(true)
	_ = r.f.SetReadDeadline(time.Now())
}

// Read reads as os.File.Read does.
func (r *Reader) Read(p []byte) (int, error) {
	for {
		if until := r.until.Swap(0); until != 0 && r.gate.busy.CompareAndSwap(0, 1) {
			n, err, ok := r.poll(p, until)
			r.gate.busy.Store(0)
			if ok {
				return n, err
			}
		}
		n, err := r.f.Read(p)
		if errors.Is(err, os.ErrDeadlineExceeded) && r.woken.Swap(false) {
			_ = r.f.SetReadDeadline(time.Time{})
			if n == 0 {
				continue
			}
			err = nil
		}
		return n, err
	}
}

// poll reads without sleeping until the unix time until; ok is false if
// nothing came by then.
func (r *Reader) poll(p []byte, until int64) (n int, err error, ok bool) {
	var rerr error
	cerr := r.rc.Read(func(fd uintptr) bool {
		for {
			n, rerr = unix.Read(int(fd), p)
			switch {
			case rerr == unix.EINTR:
			case rerr != unix.EAGAIN:
				ok = true
				return true
			case time.Now().UnixNano() > until:
				return true
			default:
				// Anything else runnable on this CPU goes first.
				_, _, _ = unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
			}
		}
	})
	switch {
	case !ok:
		return 0, nil, false
	case cerr != nil:
		return 0, cerr, true
	case rerr != nil:
		return 0, rerr, true
	case n == 0 && len(p) > 0:
		return 0, io.EOF, true
	}
	return n, nil, true
}
