package wire

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
)

// A terminal stream carries frames both ways after its head: one type
// byte, a 4-byte big-endian length, then that many bytes (at most
// MaxTermFrame). The sidecar sends input, resize (rows, cols: two 2-byte
// big-endian numbers) and end; the agent sends output and, last, exit (a
// TermExit in JSON).
const (
	FrameInput  = 'i'
	FrameResize = 'r'
	FrameEnd    = 'e'
	FrameOutput = 'o'
	FrameExit   = 'x'

	MaxTermFrame = 32 << 10
)

// WriteFrame writes one frame in one Write.
func WriteFrame(w io.Writer, typ byte, p []byte) error {
	_, err := w.Write(MakeFrame(typ, p))
	return err
}

// MakeFrame returns p framed as typ.
func MakeFrame(typ byte, p []byte) []byte {
	b := make([]byte, 5+len(p))
	b[0] = typ
	binary.BigEndian.PutUint32(b[1:5], uint32(len(p)))
	copy(b[5:], p)
	return b
}

// ReadFrame reads one frame into buf (which must hold MaxTermFrame bytes)
// and returns its type and payload; a frame over the limit is an error.
func ReadFrame(r *bufio.Reader, buf []byte) (byte, []byte, error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(h[1:])
	if n > MaxTermFrame {
		return 0, nil, fmt.Errorf("terminal frame of %d bytes (limit %d)", n, MaxTermFrame)
	}
	if _, err := io.ReadFull(r, buf[:n]); err != nil {
		return 0, nil, err
	}
	return h[0], buf[:n], nil
}
