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
		_, err := io.Copy(dst, src)
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
