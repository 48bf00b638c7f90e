package mux

import "io"

// HalfConn is a connection whose write half closes on its own (a TCP
// connection, a Stream).
type HalfConn interface {
	io.ReadWriter
	CloseWrite() error
}

// Splice copies a to b and b to a until both directions have ended (each
// passing on its end with CloseWrite) or one fails, and returns the first
// error. The caller closes both afterwards, which also ends a direction
// still copying after a failure.
func Splice(a, b HalfConn) error {
	errc := make(chan error, 2)
	copyHalf := func(dst, src HalfConn) {
		// A buffer of spliceBuffer, not io.Copy's 32 KiB (nor the 32 KiB a
		// TCP connection's ReadFrom or WriteTo takes): a thousand idle
		// tunnels hold two each.
		_, err := io.CopyBuffer(onlyWriter{dst}, onlyReader{src}, make([]byte, spliceBuffer))
		if err == nil {
			err = dst.CloseWrite()
		}
		errc <- err
	}
	go copyHalf(a, b)
	go copyHalf(b, a)
	if err := <-errc; err != nil {
		return err
	}
	return <-errc
}

// spliceBuffer is each direction's copy buffer: a stream's frames are at
// most its window, which starts at 4 KiB.
const spliceBuffer = 8 << 10

// onlyReader and onlyWriter hide ReadFrom and WriteTo, so that CopyBuffer
// uses its buffer.
type onlyReader struct{ io.Reader }
type onlyWriter struct{ io.Writer }
