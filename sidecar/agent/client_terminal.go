package agent

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/session/pty"
	"github.com/patina-dev/patina/sidecar/agent/wire"
)

// termAck bounds the wait for a terminal's head: lending the session and
// starting its shell.
const termAck = 40 * time.Second

// Terminal is a client's view of a session's terminal, on one stream of
// the agent's connection.
type Terminal struct {
	r      *reply
	cancel context.CancelFunc
	br     *bufio.Reader
	buf    []byte
	wmu    sync.Mutex
	// Head says where the output starts and whether this attach started
	// the terminal.
	Head wire.TermAttachResult
}

// TermEvent is what a terminal sent: output, or (last) its exit.
type TermEvent struct {
	Output []byte         // valid until the next call to Next
	Exit   *wire.TermExit // the terminal ended
}

// AttachTerminal attaches to a session's terminal, starting one if it has
// none (the session must then be idle: session.ErrBusy otherwise). The
// terminal outlives the attachment: Close detaches, End ends it.
func (c *Client) AttachTerminal(ctx context.Context, req wire.TermAttachRequest) (*Terminal, error) {
	if err := session.ValidateID(req.Session); err != nil {
		return nil, err
	}
	if err := pty.ValidSize(req.Rows, req.Cols); err != nil {
		return nil, fmt.Errorf("%w: %v", session.ErrInvalid, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	var head wire.TermAttachResult
	r, err := c.call(ctx, wire.MethodTermAttach, req, &head, callOpts{keep: true, duplex: true, long: true, ack: termAck, headLimit: 4 << 10})
	if err != nil {
		cancel()
		return nil, err
	}
	if head.Offset < 0 || head.Session != req.Session {
		r.Close()
		cancel()
		return nil, fmt.Errorf("%w: a terminal head with offset %d for session %q", ErrUnavailable, head.Offset, wire.CleanText(head.Session, 80))
	}
	return &Terminal{r: r, cancel: cancel, br: bufio.NewReader(r), buf: make([]byte, wire.MaxTermFrame), Head: head}, nil
}

// Next returns the terminal's next output, or its exit (then io.EOF).
func (t *Terminal) Next() (TermEvent, error) {
	typ, p, err := wire.ReadFrame(t.br, t.buf)
	if err != nil {
		return TermEvent{}, fmt.Errorf("%w: terminal: %v", ErrUnavailable, err)
	}
	switch typ {
	case wire.FrameOutput:
		return TermEvent{Output: p}, nil
	case wire.FrameExit:
		var x wire.TermExit
		if err := json.Unmarshal(p, &x); err != nil {
			return TermEvent{}, fmt.Errorf("%w: terminal exit: %v", ErrUnavailable, err)
		}
		if x.ExitCode < -1 || x.ExitCode > 255 {
			x.ExitCode = -1
		}
		x.Reason = wire.CleanText(x.Reason, 200)
		return TermEvent{Exit: &x}, nil
	}
	return TermEvent{}, fmt.Errorf("%w: terminal frame of type %d", ErrUnavailable, typ)
}

// Input types p into the terminal.
func (t *Terminal) Input(p []byte) error {
	for len(p) > 0 {
		n := min(len(p), wire.MaxTermFrame)
		if err := t.send(wire.FrameInput, p[:n]); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// Resize sets the terminal's size.
func (t *Terminal) Resize(rows, cols int) error {
	if err := pty.ValidSize(rows, cols); err != nil {
		return fmt.Errorf("%w: %v", session.ErrInvalid, err)
	}
	var b [4]byte
	binary.BigEndian.PutUint16(b[:], uint16(rows))
	binary.BigEndian.PutUint16(b[2:], uint16(cols))
	return t.send(wire.FrameResize, b[:])
}

// End ends the terminal (its shell is hung up and hands the session
// back); Next then returns the rest of its output and its exit.
func (t *Terminal) End() error { return t.send(wire.FrameEnd, nil) }

func (t *Terminal) send(typ byte, p []byte) error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	if err := wire.WriteFrame(t.r.st, typ, p); err != nil {
		return fmt.Errorf("%w: terminal: %v", ErrUnavailable, err)
	}
	return nil
}

// Close detaches; the terminal keeps running for a reconnect.
func (t *Terminal) Close() error {
	err := t.r.Close()
	t.cancel()
	return err
}
