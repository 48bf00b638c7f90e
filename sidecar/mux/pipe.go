package mux

import (
	"errors"
	"net"
	"os"
	"time"
)

// PipeConn is a connection over two pipes: one read from, one written to.
// Between two processes of one kernel it is cheaper than a unix socket:
// each read from a socket wakes the peer's poller for write space (Linux's
// unix sockets signal it on every read), a pipe only when it was full.
// Both ends must be in non-blocking mode (os.Pipe's are), so that reads,
// writes and deadlines go through the runtime's poller.
type PipeConn struct {
	r, w *os.File
}

// NewPipeConn returns a connection that reads from r and writes to w, and
// closes both.
func NewPipeConn(r, w *os.File) *PipeConn {
	return &PipeConn{r: r, w: w}
}

// Read reads from the read pipe.
func (p *PipeConn) Read(b []byte) (int, error) { return p.r.Read(b) }

// Write writes to the write pipe.
func (p *PipeConn) Write(b []byte) (int, error) { return p.w.Write(b) }

// Close closes both pipes.
func (p *PipeConn) Close() error { return errors.Join(p.r.Close(), p.w.Close()) }

// LocalAddr and RemoteAddr name the pipes.
func (p *PipeConn) LocalAddr() net.Addr  { return pipeAddr(p.r.Name()) }
func (p *PipeConn) RemoteAddr() net.Addr { return pipeAddr(p.w.Name()) }

// SetDeadline sets both deadlines.
func (p *PipeConn) SetDeadline(t time.Time) error {
	return errors.Join(p.r.SetReadDeadline(t), p.w.SetWriteDeadline(t))
}

// SetReadDeadline sets the read pipe's deadline.
func (p *PipeConn) SetReadDeadline(t time.Time) error { return p.r.SetReadDeadline(t) }

// SetWriteDeadline sets the write pipe's deadline.
func (p *PipeConn) SetWriteDeadline(t time.Time) error { return p.w.SetWriteDeadline(t) }

type pipeAddr string

func (a pipeAddr) Network() string { return "pipe" }
func (a pipeAddr) String() string  { return string(a) }
