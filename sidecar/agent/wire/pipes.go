package wire

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/patina-dev/patina/sidecar/mux"
)

// PipesPreamble opens a connection on the agent's unix socket that moves to
// two pipes: the sidecar sends it with the agent's ends of both (SCM_RIGHTS)
// and closes the socket; the mux then runs over the pipes, hello first as
// always. Linux wakes a unix socket's peer for write space on every read,
// so each exec woke the sidecar and the agent once more for nothing; a pipe
// wakes its writer only when it was full (sidecar/DESIGN.md, "Speed"). Its
// first byte is no frame type, so an agent tells it from a plain mux
// client (the exec relay, an older sidecar) by its first read.
const PipesPreamble = "PATINA-PIPES/1\n"

// offerWait bounds OfferPipes' one write: an agent that does not read its
// socket must not hold the sidecar's connect.
const offerWait = 5 * time.Second

// OfferPipes moves a new connection to the agent from uc to two pipes (the
// sidecar's side). It sends the agent its ends and closes uc and its own
// copies of them, so that the agent's exit closes the connection. Nothing
// is ever read from uc: no descriptor can come back this way.
func OfferPipes(uc *net.UnixConn) (net.Conn, error) {
	defer uc.Close()
	toAgentR, toAgentW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	fromAgentR, fromAgentW, err := os.Pipe()
	if err != nil {
		toAgentR.Close()
		toAgentW.Close()
		return nil, err
	}
	// Fd puts these two in blocking mode, which the agent undoes: they are
	// its ends, and this side closes them below.
	rights := syscall.UnixRights(int(toAgentR.Fd()), int(fromAgentW.Fd()))
	_ = uc.SetWriteDeadline(time.Now().Add(offerWait))
	_, _, err = uc.WriteMsgUnix([]byte(PipesPreamble), rights, nil)
	toAgentR.Close()
	fromAgentW.Close()
	if err != nil {
		toAgentW.Close()
		fromAgentR.Close()
		return nil, fmt.Errorf("hand the agent its pipes: %w", err)
	}
	return mux.NewPipeConn(fromAgentR, toAgentW), nil
}

// errBadPipes: a connection that sent descriptors other than the preamble
// and two pipes.
var errBadPipes = errors.New("agent: a connection sent descriptors that are not the sidecar's two pipes")

// AcceptPipes reads a new connection's first bytes (the agent's side). A
// connection that opens with PipesPreamble and exactly two pipes continues
// on them (the socket is closed); any other is served as it is, its first
// bytes read again by the mux. Descriptors sent any other way are closed
// and the connection refused. A connection silent for timeout is refused.
func AcceptPipes(nc net.Conn, timeout time.Duration) (net.Conn, error) {
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		return nc, nil
	}
	buf := make([]byte, 512)
	oob := make([]byte, unix.CmsgSpace(2*4)) // room for two descriptors: more are truncated, and closed
	_ = uc.SetReadDeadline(time.Now().Add(timeout))
	n, oobn, flags, _, err := uc.ReadMsgUnix(buf, oob)
	_ = uc.SetReadDeadline(time.Time{})
	fds := receivedFDs(oob[:oobn])
	closeAll := func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	if err != nil {
		closeAll()
		return nil, err
	}
	if n == 0 || buf[0] != PipesPreamble[0] {
		if len(fds) > 0 || flags&unix.MSG_CTRUNC != 0 {
			closeAll()
			return nil, errBadPipes
		}
		return &prefixConn{Conn: uc, prefix: buf[:n]}, nil
	}
	if !bytes.Equal(buf[:n], []byte(PipesPreamble)) || len(fds) != 2 || flags&unix.MSG_CTRUNC != 0 || !isFIFO(fds[0]) || !isFIFO(fds[1]) {
		closeAll()
		return nil, errBadPipes
	}
	for _, fd := range fds {
		if err := unix.SetNonblock(fd, true); err != nil {
			closeAll()
			return nil, err
		}
	}
	uc.Close()
	return mux.NewPipeConn(os.NewFile(uintptr(fds[0]), "from-sidecar"), os.NewFile(uintptr(fds[1]), "to-sidecar")), nil
}

// receivedFDs are the descriptors in a control message (none if it does
// not parse).
func receivedFDs(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if got, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, got...)
		}
	}
	return fds
}

func isFIFO(fd int) bool {
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFIFO
}

// prefixConn is a connection whose first bytes were read already.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}
