package mux

import (
	"encoding/binary"
	"io"
	"os"
	"sync"
	"time"
)

// Stream is one stream of a Conn: an io.ReadWriteCloser with half-close.
// Read and Write may be called from different goroutines.
type Stream struct {
	c      *Conn
	id     uint32
	remote bool   // opened by the peer
	header []byte // the OPEN payload

	readable chan struct{}
	writable chan struct{}
	done     chan struct{} // closed once the stream is reset or its connection closes
	doneOnce sync.Once

	mu         sync.Mutex
	rbuf       [][]byte
	rlen       int
	recvWindow int // bytes the peer may still send
	recvLimit  int // the window's size now (InitialWindow, growing to Window)
	grown      int // bytes of recvLimit drawn from the connection's budget
	consumed   int // bytes read (or discarded) and not yet credited back
	sendWindow int // bytes we may still send
	remoteFIN  bool
	localFIN   bool
	readClosed bool // Close called: incoming data is discarded
	// resetErr fails reads and writes after a reset; a reset that comes
	// after the peer finished sending only fails writes (writeErr): what
	// the peer sent whole stays readable.
	resetErr  error
	writeErr  error
	rdeadline time.Time
	wdeadline time.Time
	forgotten bool
}

// ID returns the stream's id.
func (s *Stream) ID() uint32 { return s.id }

// Header returns the header the stream was opened with (for a stream
// accepted from the peer: untrusted, at most MaxOpenHeader bytes).
func (s *Stream) Header() []byte { return s.header }

// Done is closed when the stream is reset (by either side) or its
// connection closes: whoever serves the stream can stop.
func (s *Stream) Done() <-chan struct{} { return s.done }

func (s *Stream) markDone() { s.doneOnce.Do(func() { close(s.done) }) }

func (s *Stream) wake() {
	select {
	case s.readable <- struct{}{}:
	default:
	}
	select {
	case s.writable <- struct{}{}:
	default:
	}
}

// Read reads data sent by the peer; io.EOF once the peer closed its half
// and everything was read.
func (s *Stream) Read(p []byte) (int, error) {
	for {
		s.mu.Lock()
		if s.rlen > 0 {
			n := 0
			for n < len(p) && len(s.rbuf) > 0 {
				k := copy(p[n:], s.rbuf[0])
				n += k
				if k == len(s.rbuf[0]) {
					s.rbuf[0] = nil
					s.rbuf = s.rbuf[1:]
				} else {
					s.rbuf[0] = s.rbuf[0][k:]
				}
			}
			s.rlen -= n
			s.consumed += n
			credit := s.takeCreditLocked()
			s.mu.Unlock()
			s.sendCredit(credit)
			return n, nil
		}
		if s.remoteFIN {
			s.mu.Unlock()
			return 0, io.EOF
		}
		if s.resetErr != nil {
			err := s.resetErr
			s.mu.Unlock()
			return 0, err
		}
		deadline := s.rdeadline
		s.mu.Unlock()
		if err := s.wait(s.readable, deadline); err != nil {
			return 0, err
		}
	}
}

// takeCreditLocked returns how much window to give back to the peer: once
// half the window is consumed, all of it, and the window doubles (up to
// Window) if the budget has the bytes.
func (s *Stream) takeCreditLocked() int {
	if s.remoteFIN || s.resetErr != nil || s.consumed < s.recvLimit/2 {
		return 0
	}
	n := s.consumed
	s.consumed = 0
	if grow := min(s.recvLimit, Window-s.recvLimit); grow > 0 && !s.c.closedNow() {
		if b := s.c.cfg.Budget; b == nil || b.TryAcquireSpare(int64(grow)) {
			if b != nil {
				s.grown += grow
			}
			s.recvLimit += grow
			n += grow
		}
	}
	s.recvWindow += n
	return n
}

// releaseWindow gives what the window grew by back to the budget (once:
// the stream is finished or its connection closed).
func (s *Stream) releaseWindow() {
	s.mu.Lock()
	n := s.grown
	s.grown = 0
	s.mu.Unlock()
	if n > 0 {
		s.c.cfg.Budget.Release(int64(n))
	}
}

func (s *Stream) sendCredit(n int) {
	if n <= 0 {
		return
	}
	var p [4]byte
	binary.BigEndian.PutUint32(p[:], uint32(n))
	_ = s.c.writeFrame(typeCredit, 0, s.id, p[:])
}

// wait blocks until ch is signalled, the deadline passes or the connection
// closes.
func (s *Stream) wait(ch chan struct{}, deadline time.Time) error {
	var timeout <-chan time.Time
	if !deadline.IsZero() {
		d := time.Until(deadline)
		if d <= 0 {
			return os.ErrDeadlineExceeded
		}
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-ch:
		return nil
	case <-s.c.done:
		// Data that arrived before the connection closed is still read;
		// the caller loops and finds it, or gets the error below.
		s.mu.Lock()
		pending := s.rlen > 0 || s.remoteFIN || s.resetErr != nil
		s.mu.Unlock()
		if pending && ch == s.readable {
			return nil
		}
		return s.c.connErr()
	case <-timeout:
		return os.ErrDeadlineExceeded
	}
}

// Write sends p, waiting for window as needed.
func (s *Stream) Write(p []byte) (int, error) { return s.write(p, false) }

// WriteFinal sends p and closes the write half in the same frame: a whole
// answer costs one frame.
func (s *Stream) WriteFinal(p []byte) (int, error) { return s.write(p, true) }

// Conn is the stream's connection.
func (s *Stream) Conn() *Conn { return s.c }

// CloseWrite closes the write half: the peer reads io.EOF.
func (s *Stream) CloseWrite() error {
	s.mu.Lock()
	done := s.localFIN
	s.mu.Unlock()
	if done {
		return nil
	}
	_, err := s.write(nil, true)
	return err
}

func (s *Stream) write(p []byte, fin bool) (int, error) {
	total := 0
	for {
		s.mu.Lock()
		switch {
		case s.resetErr != nil || s.writeErr != nil:
			err := s.resetErr
			if err == nil {
				err = s.writeErr
			}
			s.mu.Unlock()
			return total, err
		case s.localFIN:
			s.mu.Unlock()
			return total, ErrWriteClosed
		}
		n := min(len(p), s.sendWindow, MaxData)
		if n == 0 && len(p) > 0 {
			deadline := s.wdeadline
			s.mu.Unlock()
			if err := s.wait(s.writable, deadline); err != nil {
				return total, err
			}
			continue
		}
		last := fin && n == len(p)
		s.sendWindow -= n
		if last {
			s.localFIN = true
		}
		s.mu.Unlock()
		var flags byte
		if last {
			flags = flagFIN
		}
		if err := s.c.writeFrame(typeData, flags, s.id, p[:n]); err != nil {
			return total, err
		}
		total += n
		p = p[n:]
		if len(p) == 0 {
			if last {
				s.maybeForget()
			}
			return total, nil
		}
	}
}

// addCredit adds to the send window; false if the peer overflows it.
func (s *Stream) addCredit(inc uint32) bool {
	s.mu.Lock()
	if int64(s.sendWindow)+int64(inc) > 1<<31 {
		s.mu.Unlock()
		return false
	}
	s.sendWindow += int(inc)
	s.mu.Unlock()
	s.wake()
	return true
}

// setReset marks the stream reset (by either side) and wakes its users.
func (s *Stream) setReset(err *ResetError) {
	s.mu.Lock()
	switch {
	case s.resetErr != nil || s.writeErr != nil || (s.remoteFIN && s.localFIN):
	case s.remoteFIN:
		s.writeErr = err
	default:
		s.resetErr = err
		s.rbuf, s.rlen = nil, 0
	}
	s.mu.Unlock()
	s.markDone()
	s.wake()
	s.c.forget(s)
}

// Reset aborts the stream both ways, telling the peer why.
func (s *Stream) Reset(reason string) {
	s.mu.Lock()
	finished := s.resetErr != nil || s.writeErr != nil || (s.remoteFIN && s.localFIN)
	s.mu.Unlock()
	if finished {
		s.c.forget(s)
		return
	}
	if len(reason) > maxReason {
		reason = reason[:maxReason]
	}
	s.setReset(&ResetError{Reason: reason})
	_ = s.c.writeFrame(typeReset, 0, s.id, []byte(reason))
}

// Close ends the stream: a stream both sides finished is simply
// forgotten; otherwise it is reset, so the peer stops sending.
func (s *Stream) Close() error {
	s.mu.Lock()
	s.readClosed = true
	finished := s.resetErr != nil || s.writeErr != nil || (s.remoteFIN && s.localFIN)
	s.mu.Unlock()
	if finished {
		s.c.forget(s)
		return nil
	}
	s.Reset("closed")
	return nil
}

// maybeForget drops the stream from the connection's table once both
// halves are closed (data may still be buffered for Read).
func (s *Stream) maybeForget() {
	s.mu.Lock()
	done := s.remoteFIN && s.localFIN && !s.forgotten
	if done {
		s.forgotten = true
	}
	s.mu.Unlock()
	if done {
		s.c.forget(s)
	}
}

// SetDeadline sets the read and write deadlines.
func (s *Stream) SetDeadline(t time.Time) error {
	s.mu.Lock()
	s.rdeadline, s.wdeadline = t, t
	s.mu.Unlock()
	s.wake()
	return nil
}

// SetReadDeadline makes Read fail with os.ErrDeadlineExceeded after t.
func (s *Stream) SetReadDeadline(t time.Time) error {
	s.mu.Lock()
	s.rdeadline = t
	s.mu.Unlock()
	s.wake()
	return nil
}

// SetWriteDeadline makes a Write waiting for window fail after t.
func (s *Stream) SetWriteDeadline(t time.Time) error {
	s.mu.Lock()
	s.wdeadline = t
	s.mu.Unlock()
	s.wake()
	return nil
}
