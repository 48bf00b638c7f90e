package agent

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
)

// A terminal stream carries frames both ways after its head: one type
// byte, a 4-byte big-endian length, then that many bytes (at most
// maxTermFrame). The sidecar sends input, resize (rows, cols: two 2-byte
// big-endian numbers) and end; the agent sends output and, last, exit (a
// TermExit in JSON).
const (
	frameInput  = 'i'
	frameResize = 'r'
	frameEnd    = 'e'
	frameOutput = 'o'
	frameExit   = 'x'

	maxTermFrame = 32 << 10
)

// writeFrame writes one frame in one Write.
func writeFrame(w io.Writer, typ byte, p []byte) error {
	_, err := w.Write(makeFrame(typ, p))
	return err
}

// makeFrame returns p framed as typ.
func makeFrame(typ byte, p []byte) []byte {
	b := make([]byte, 5+len(p))
	b[0] = typ
	binary.BigEndian.PutUint32(b[1:5], uint32(len(p)))
	copy(b[5:], p)
	return b
}

// readFrame reads one frame into buf (which must hold maxTermFrame bytes)
// and returns its type and payload; a frame over the limit is an error.
func readFrame(r *bufio.Reader, buf []byte) (byte, []byte, error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(h[1:])
	if n > maxTermFrame {
		return 0, nil, fmt.Errorf("terminal frame of %d bytes (limit %d)", n, maxTermFrame)
	}
	if _, err := io.ReadFull(r, buf[:n]); err != nil {
		return 0, nil, err
	}
	return h[0], buf[:n], nil
}
