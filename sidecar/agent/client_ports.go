package agent

import (
	"context"
	"time"

	"github.com/patina-dev/patina/sidecar/agent/wire"
)

// portAck bounds the wait for the agent's answer to a dial (its own dial is
// bounded by portDialTimeout).
const portAck = wire.PortDialTimeout + 5*time.Second

// Tunnel is a connection to a port inside the workspace, carried by one
// stream of the agent's connection. It is a mux.HalfConn.
type Tunnel struct {
	r      *reply
	cancel context.CancelFunc
	// Addr is where the agent connected, as it said (informational).
	Addr string
}

// DialPort connects to a TCP port on the workspace's loopback, through
// the agent. ErrNotListening: nothing listens there. The tunnel lives
// until Close (or until ctx ends, which resets it).
func (c *Client) DialPort(ctx context.Context, port int) (*Tunnel, error) {
	if err := wire.ValidPort(port); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	var res portDialResult
	r, err := c.call(ctx, wire.MethodPortDial, wire.PortDialRequest{Port: port}, &res, callOpts{keep: true, duplex: true, long: true, ack: portAck})
	if err != nil {
		cancel()
		return nil, err
	}
	return &Tunnel{r: r, cancel: cancel, Addr: wire.CleanText(res.Addr, 64)}, nil
}

// Read reads what the workspace's end sent.
func (t *Tunnel) Read(p []byte) (int, error) { return t.r.Read(p) }

// Write sends p to the workspace's end.
func (t *Tunnel) Write(p []byte) (int, error) { return t.r.st.Write(p) }

// CloseWrite tells the workspace's end that nothing more will be sent.
func (t *Tunnel) CloseWrite() error { return t.r.st.CloseWrite() }

// Close ends the tunnel both ways.
func (t *Tunnel) Close() error {
	err := t.r.Close()
	t.cancel()
	return err
}
