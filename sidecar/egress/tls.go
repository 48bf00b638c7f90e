package egress

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"
)

// maxHello bounds what is read (and kept to replay) while looking for a
// ClientHello's server name.
const maxHello = 64 << 10

// helloTimeout bounds the wait for a whole ClientHello once it began.
const helloTimeout = 5 * time.Second

var errGotHello = errors.New("got the ClientHello")

// recorder is the client's connection as crypto/tls sees it while it reads
// a ClientHello: what it reads is kept (to replay to the server), what it
// writes (an alert) is dropped.
type recorder struct {
	*net.TCPConn
	r   io.Reader
	buf bytes.Buffer
}

func (r *recorder) Read(p []byte) (int, error) {
	if r.buf.Len() >= maxHello {
		return 0, errors.New("the ClientHello is too large")
	}
	if len(p) > maxHello-r.buf.Len() {
		p = p[:maxHello-r.buf.Len()]
	}
	n, err := r.r.Read(p)
	r.buf.Write(p[:n])
	return n, err
}

func (r *recorder) Write(p []byte) (int, error) { return len(p), nil }
func (r *recorder) Close() error                { return nil }

// serverName reads a ClientHello from c (its first byte already read) with
// crypto/tls's own parser, and returns its server name and every byte read.
func serverName(ctx context.Context, c *net.TCPConn, first []byte) (name string, hello bool, read []byte) {
	rec := &recorder{TCPConn: c, r: io.MultiReader(bytes.NewReader(first), c)}
	_ = c.SetReadDeadline(time.Now().Add(helloTimeout))
	defer c.SetReadDeadline(time.Time{})
	cfg := &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		name, hello = h.ServerName, true
		return nil, errGotHello
	}}
	_ = tls.Server(rec, cfg).HandshakeContext(ctx)
	return name, hello, rec.buf.Bytes()
}

// handleTLS matches a TLS connection by the server name of its
// ClientHello.
func (s *Service) handleTLS(ctx context.Context, m *member, f *flow, orig netip.AddrPort, first []byte) {
	sni, hello, replay := serverName(ctx, f.client, first)
	p := s.policy(m)
	if !hello {
		if p.Mode == ModeOpen {
			s.pipeChecked(ctx, m, f, p, orig, replay)
			return
		}
		s.refused(m, orig.String(), "not in the allow list (no readable TLS ClientHello)")
		reset(f.client)
		return
	}
	name, nameErr := normalName(sni, false)
	dest := fmt.Sprintf("%s:%d (TLS, %s)", sni, orig.Port(), orig.Addr())
	_, byAddr := p.MatchAddr(orig.Addr(), orig.Port())
	if p.Mode == ModeOpen || byAddr {
		// By address: mode open, or an address rule that allows orig.
		if r := s.check(p, orig, ""); r != nil {
			s.refused(m, dest, r.rule)
			reset(f.client)
			return
		}
		if nameErr == nil && s.hookTLS(ctx, m, f, name, "", replay, func(ctx context.Context) (net.Conn, netip.AddrPort, error) {
			c, err := s.cfg.Dial(ctx, orig)
			return c, orig, err
		}) {
			return
		}
		s.pipe(ctx, m, f, orig, replay, "")
		return
	}
	switch {
	case p.Mode != ModeAllow:
		s.refused(m, dest, "network "+p.Mode)
		reset(f.client)
		return
	case sni == "":
		s.refused(m, orig.String()+" (TLS)", "not in the allow list (a TLS ClientHello without a server name)")
		reset(f.client)
		return
	case nameErr != nil:
		s.refused(m, dest, "not in the allow list (the TLS server name is not a DNS name)")
		reset(f.client)
		return
	}
	if _, ok := p.MatchName(name, orig.Port()); !ok {
		s.refused(m, dest, "not in the allow list")
		reset(f.client)
		return
	}
	// The hook first (it says at once, having read nothing, whether it
	// wants the connection): each of its upstream connections is resolved
	// and checked by the policy of the moment.
	if s.hookTLS(ctx, m, f, name, name, replay, func(ctx context.Context) (net.Conn, netip.AddrPort, error) {
		c, ap, r := s.dialName(ctx, s.policy(m), name, orig.Port())
		if r != nil {
			s.refused(m, dest, r.rule)
			return nil, ap, r
		}
		return c, ap, nil
	}) {
		return
	}
	up, ap, r := s.dialName(ctx, p, name, orig.Port())
	if r != nil {
		s.refused(m, dest, r.rule)
		reset(f.client)
		return
	}
	s.carry(m, f, up, ap, name, replay)
}

// hookTLS offers an allowed TLS connection to the hook. Each upstream
// connection the hook opens through dial is recorded in the flow: checked
// again against the policy of the moment (by checkName, "" for by
// address), re-checked when the policy changes, and cut with the flow.
func (s *Service) hookTLS(ctx context.Context, m *member, f *flow, name, checkName string, replay []byte, dial func(context.Context) (net.Conn, netip.AddrPort, error)) bool {
	if s.cfg.TLS == nil || !s.cfg.TLS.Wants(m.id) {
		return false
	}
	tracked := func(ctx context.Context) (net.Conn, error) {
		c, ap, err := dial(ctx)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		f.dst, f.name = ap, checkName
		r := s.check(m.policy, ap, checkName)
		s.mu.Unlock()
		if r != nil {
			c.Close()
			return nil, r
		}
		if !f.addHooked(c) {
			c.Close()
			return nil, net.ErrClosed
		}
		return &hookedConn{Conn: c, f: f}, nil
	}
	rc := &replayConn{TCPConn: f.client, r: io.MultiReader(bytes.NewReader(replay), f.client)}
	return s.cfg.TLS.HandleTLS(ctx, m.id, name, rc, tracked)
}

// hookedConn is an upstream connection of a hook, forgotten by its flow
// once closed.
type hookedConn struct {
	net.Conn
	f *flow
}

func (c *hookedConn) Close() error {
	c.f.dropHooked(c.Conn)
	return c.Conn.Close()
}

// CloseWrite half-closes, where the connection can.
func (c *hookedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// replayConn reads bytes already read first.
type replayConn struct {
	*net.TCPConn
	r io.Reader
}

func (c *replayConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// WriteTo hides the TCP connection's own, which would skip the replay.
func (c *replayConn) WriteTo(w io.Writer) (int64, error) { return io.Copy(w, c.r) }

// pipeChecked connects to orig if p allows it by address, else refuses.
func (s *Service) pipeChecked(ctx context.Context, m *member, f *flow, p Policy, orig netip.AddrPort, replay []byte) {
	if r := s.check(p, orig, ""); r != nil {
		s.refused(m, orig.String(), r.rule)
		reset(f.client)
		return
	}
	s.pipe(ctx, m, f, orig, replay, "")
}

// policy is a workspace's policy now.
func (s *Service) policy(m *member) Policy {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return m.policy
}
