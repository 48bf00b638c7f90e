package inside

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"

	"github.com/patina-dev/patina/sidecar/agent/wire"
	"github.com/patina-dev/patina/sidecar/mux"
)

// portDial connects to a TCP port on the container's loopback (127.0.0.1,
// then ::1) and, once it answered, carries the connection's bytes over the
// stream both ways until both ends are done or one fails.
func (s *Server) portDial(st *mux.Stream, args json.RawMessage) error {
	var req wire.PortDialRequest
	if err := decodeArgs(args, &req); err != nil {
		return err
	}
	if err := wire.ValidPort(req.Port); err != nil {
		return err
	}
	nc, err := dialLoopback(req.Port)
	if err != nil {
		return err
	}
	defer nc.Close()
	if err := wire.WriteHead(st, wire.PortDialResult{Addr: nc.RemoteAddr().String()}); err != nil {
		return nil // the stream is gone: nothing to answer
	}
	if err := mux.Splice(st, nc.(*net.TCPConn)); err != nil {
		st.Reset("tunnel: " + err.Error())
	}
	return nil
}

// dialLoopback connects to port on the IPv4 loopback, or on the IPv6 one
// when nothing listens on the first.
func dialLoopback(port int) (net.Conn, error) {
	d := net.Dialer{Timeout: wire.PortDialTimeout}
	var firstErr error
	for _, host := range []string{"127.0.0.1", "::1"} {
		nc, err := d.Dial("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err == nil {
			return nc, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.EADDRNOTAVAIL) && !errors.Is(err, syscall.ENETUNREACH) {
			break
		}
	}
	return nil, fmt.Errorf("%w: port %d: %v", wire.ErrNotListening, port, firstErr)
}
