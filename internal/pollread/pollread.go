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
// for it, for at most the time given, yielding at every turn to other
// goroutines that are runnable and to other threads and processes on its
// CPU; otherwise, and after that, it waits in the runtime's poller as any
// read does. One Reader of a Gate polls at a time, and only while at most
// one operation of the Gate is in flight. In a process with one P (the
// agent; the sidecar on a small machine) a goroutine that waits for
// network or pipe input is woken only once the poll ends (the runtime
// checks its poller when nothing else is runnable): the poll's length
// bounds that delay.
package pollread

import (
	"errors"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// enabled: Readers poll after Expect (SetEnabled).
var enabled atomic.Bool

// SetEnabled turns polling on or off in this process (off by default; it
// can be on only on Linux). It is the one switch of this trick: a
// program's main calls it (patina: PATINA_POLL=on in the environment of
// serve or of a workspace's agent); off, every Reader reads as os.File
// does. Off by default since, measured on a shared 2-CPU VM under load,
// exec p50 through HTTP was lower without it (sidecar/DESIGN.md).
func SetEnabled(on bool) { enabled.Store(on && pollSupported) }

// Gate lets one Reader poll at a time, and only while a single operation
// that awaits a reply is in flight (Begin, End): share one across the
// Readers of a process (or of a part of it), so that polling takes at most
// one CPU, and none when the process is busy with several requests (then
// a wait is short anyway, and the CPU is better spent on the work).
type Gate struct {
	busy   atomic.Int32 // a Reader polls
	active atomic.Int32 // operations in flight
	polls  atomic.Int64 // polls made
}

// Begin counts an operation in flight until End.
func (g *Gate) Begin() { g.active.Add(1) }

// End ends an operation that Begin counted.
func (g *Gate) End() { g.active.Add(-1) }

// Polls is how many polls the Gate's Readers have made.
func (g *Gate) Polls() int64 { return g.polls.Load() }

// State says whether a Reader polls now, and how many operations Begin
// counts.
func (g *Gate) State() (polling bool, inFlight int32) {
	return g.busy.Load() != 0, g.active.Load()
}

// Reader reads f (a pipe or FIFO in non-blocking mode, as os.Pipe and
// os.OpenFile of a FIFO give) and polls it after Expect. It owns f's read
// deadline: set one through its SetReadDeadline.
type Reader struct {
	f    *os.File
	rc   syscall.RawConn // nil: f is read plainly
	gate *Gate

	mu    sync.Mutex
	until int64     // unix nanoseconds when a due poll ends; 0: none due
	woken bool      // f's deadline is Expect's wake-up (in the past)
	user  time.Time // the deadline of the Reader's user
}

// New returns a Reader of f. A file not in non-blocking mode is read
// plainly (a poll would block in read).
func New(f *os.File, gate *Gate) *Reader {
	r := &Reader{f: f, gate: gate}
	rc, err := f.SyscallConn()
	if err != nil {
		return r
	}
	nonblock := false
	_ = rc.Control(func(fd uintptr) {
		fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		nonblock = err == nil && fl&unix.O_NONBLOCK != 0
	})
	if nonblock {
		r.rc = rc
	}
	return r
}

// Expect makes the Reader poll for up to d from now, if at most one
// operation of its Gate is in flight: a Read that waits already is woken
// (through a read deadline in the past) and polls. Expect does not block.
func (r *Reader) Expect(d time.Duration) {
	if r.rc == nil || d <= 0 || !enabled.Load() || r.gate.active.Load() > 1 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.until = time.Now().Add(d).UnixNano()
	r.woken = true
	_ = r.f.SetReadDeadline(time.Now())
}

// SetReadDeadline sets the deadline of reads, as os.File's does.
func (r *Reader) SetReadDeadline(t time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.user = t
	if r.woken {
		return nil // take restores it
	}
	return r.f.SetReadDeadline(t)
}

// take returns when a due poll ends (0: none is due), and puts back the
// user's deadline in place of a wake-up.
func (r *Reader) take() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	until := r.until
	r.until = 0
	if r.woken {
		r.woken = false
		_ = r.f.SetReadDeadline(r.user)
	}
	return until
}

// wokenNow reports whether f's deadline is a wake-up take has not undone.
func (r *Reader) wokenNow() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.woken
}

// Read reads as os.File.Read does.
func (r *Reader) Read(p []byte) (int, error) {
	for {
		if until := r.take(); until != 0 && r.gate.busy.CompareAndSwap(0, 1) {
			r.gate.polls.Add(1)
			n, err, ok := r.poll(p, until)
			r.gate.busy.Store(0)
			if ok {
				return n, err
			}
		}
		n, err := r.f.Read(p)
		if n == 0 && errors.Is(err, os.ErrDeadlineExceeded) && r.wokenNow() {
			continue // Expect's wake-up, not the user's deadline
		}
		return n, err
	}
}

// poll reads without sleeping until the unix time until, while at most one
// operation of the gate is in flight; ok is false if nothing came. It runs
// under RawConn.Control: no deadline applies (Expect's wake-up is in the
// past), and a Close waits for it to end.
func (r *Reader) poll(p []byte, until int64) (n int, err error, ok bool) {
	var rerr error
	cerr := r.rc.Control(func(fd uintptr) {
		for {
			n, rerr = unix.Read(int(fd), p)
			if rerr != unix.EAGAIN && rerr != unix.EINTR {
				ok = true
				return
			}
			if time.Now().UnixNano() > until || r.gate.active.Load() > 1 {
				return
			}
			// Anything else runnable goes first: other goroutines of this
			// P, other threads and processes on this CPU.
			runtime.Gosched()
			yieldCPU()
		}
	})
	switch {
	case cerr != nil || !ok:
		return 0, nil, false // closed (the plain read says so) or nothing came
	case rerr != nil:
		return 0, &os.PathError{Op: "read", Path: r.f.Name(), Err: rerr}, true
	case n == 0 && len(p) > 0:
		return 0, io.EOF, true
	}
	return n, nil, true
}
