package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"
)

// flow is one connection through the proxy: a workspace's, and the one to
// its destination.
type flow struct {
	client *net.TCPConn
	mu     sync.Mutex
	up     net.Conn
	// hooked are the upstream connections a TLSHook opened for the flow
	// (several for one client connection: HTTP/1.1 and HTTP/2 upstream),
	// cut with it.
	hooked map[net.Conn]struct{}
	closed bool
	dst    netip.AddrPort // the upstream address
	name   string         // the name it was allowed by ("": its address)
}

func (f *flow) setUp(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.up = c
	return true
}

// close cuts both sides at once (a reset to the workspace).
func (f *flow) close() { f.end(true) }

// finish closes both sides once the flow is over (what was written is
// still delivered).
func (f *flow) finish() { f.end(false) }

func (f *flow) end(cut bool) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	f.closed = true
	up, hooked := f.up, f.hooked
	f.hooked = nil
	f.mu.Unlock()
	if cut {
		_ = f.client.SetLinger(0)
	}
	f.client.Close()
	if up != nil {
		up.Close()
	}
	for c := range hooked {
		c.Close()
	}
}

// addHooked records an upstream connection a hook opened: it is closed
// with the flow (false: the flow is over already).
func (f *flow) addHooked(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	if f.hooked == nil {
		f.hooked = map[net.Conn]struct{}{}
	}
	f.hooked[c] = struct{}{}
	return true
}

func (f *flow) dropHooked(c net.Conn) {
	f.mu.Lock()
	delete(f.hooked, c)
	f.mu.Unlock()
}

func (s *Service) serve(ctx context.Context, ln *net.TCPListener) {
	for {
		c, err := ln.AcceptTCP()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			s.log.Warn("egress proxy: accept", "err", err)
			select {
			case <-time.After(acceptRetry):
			case <-ctx.Done():
				return
			}
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.handle(ctx, c)
		}()
	}
}

// reset closes a workspace's connection with a RST: refused at once.
func reset(c *net.TCPConn) {
	_ = c.SetLinger(0)
	c.Close()
}

// handle decides one connection and carries it.
func (s *Service) handle(ctx context.Context, c *net.TCPConn) {
	src := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr()
	m, p, ok := s.lookup(src)
	if !ok {
		s.log.Debug("egress proxy: a connection from an address that is no workspace's", "src", src)
		reset(c)
		return
	}
	orig, err := s.cfg.OriginalDst(c)
	if err != nil {
		s.log.Warn("egress proxy: original destination", "workspace_id", m.id, "err", err)
		reset(c)
		return
	}
	orig = netip.AddrPortFrom(orig.Addr().Unmap(), orig.Port())
	f := &flow{client: c}
	if !s.track(m, f) {
		s.refused(m, orig.String(), "too many connections open")
		reset(c)
		return
	}
	defer s.untrack(m, f)

	hook := s.cfg.TLS != nil && s.cfg.TLS.Wants(m.id)
	switch {
	case p.Mode == ModeNone:
		s.refuse(m, c, orig.String(), "network none")
		return
	case p.Mode == ModeOpen && !hook:
		if r := s.check(p, orig, ""); r != nil {
			s.refuse(m, c, orig.String(), r.rule)
			return
		}
		s.pipe(ctx, m, f, orig, nil, "")
		return
	case p.Mode == ModeAllow && !hook:
		if _, ok := p.MatchAddr(orig.Addr(), orig.Port()); ok {
			if r := s.check(p, orig, ""); r != nil {
				s.refuse(m, c, orig.String(), r.rule)
				return
			}
			s.pipe(ctx, m, f, orig, nil, "")
			return
		}
	}
	// A name is needed (or a hook may want the connection): read it from
	// the client's first bytes.
	_ = c.SetReadDeadline(time.Now().Add(s.cfg.PeekTimeout))
	first := make([]byte, 1)
	n, _ := io.ReadFull(c, first)
	_ = c.SetReadDeadline(time.Time{})
	switch {
	case n == 1 && first[0] == 0x16: // a TLS handshake record
		s.handleTLS(ctx, m, f, orig, first)
	case n == 1 && first[0] >= 'A' && first[0] <= 'Z': // an HTTP method
		s.handleHTTP(ctx, m, f, orig, first)
	default:
		if p.Mode == ModeOpen {
			if r := s.check(p, orig, ""); r != nil {
				s.refuse(m, c, orig.String(), r.rule)
				return
			}
			s.pipe(ctx, m, f, orig, first[:n], "")
			return
		}
		s.refused(m, orig.String(), "not in the allow list (no TLS server name or HTTP Host to match a name by)")
		reset(c)
	}
}

// track counts a flow in, within the limits.
func (s *Service) track(m *member, f *flow) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(m.flows) >= s.cfg.MaxConns || s.total >= s.cfg.MaxConnsTotal {
		return false
	}
	m.flows[f] = struct{}{}
	s.total++
	return true
}

func (s *Service) untrack(m *member, f *flow) {
	s.mu.Lock()
	if _, ok := m.flows[f]; ok {
		delete(m.flows, f)
		s.total--
	}
	s.mu.Unlock()
	f.finish()
}

// refuse refuses a connection at once: an HTTP client gets a 403 naming
// the policy, anything else a reset.
func (s *Service) refuse(m *member, c *net.TCPConn, dest, rule string) {
	s.refused(m, dest, rule)
	_ = c.SetReadDeadline(time.Now().Add(s.cfg.PeekTimeout))
	b := make([]byte, 1)
	n, _ := c.Read(b)
	if n == 1 && b[0] >= 'A' && b[0] <= 'Z' {
		_ = c.SetWriteDeadline(time.Now().Add(refusalWrite))
		write403(c, dest, rule)
		closeGently(c)
		return
	}
	reset(c)
}

// closeGently ends a connection after an answer: the answer is sent, then
// what the client still sends is read and dropped for a moment, so that a
// reset does not destroy the answer before the client reads it.
func closeGently(c *net.TCPConn) {
	_ = c.CloseWrite()
	_ = c.SetReadDeadline(time.Now().Add(closeDrain))
	_, _ = io.Copy(io.Discard, io.LimitReader(c, 1<<20))
	c.Close()
}

func write403(w io.Writer, dest, rule string) {
	body := fmt.Sprintf("patina: the workspace's network policy refuses %s: %s\n", dest, rule)
	fmt.Fprintf(w, "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\nX-Patina-Refused: %s\r\n\r\n%s", len(body), sanitizeHeader(rule), body)
}

func sanitizeHeader(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c < 0x20 || c == 0x7f {
			b[i] = ' '
		}
	}
	return string(b)
}

// dialName resolves name and connects to the first of its addresses that
// p allows (the workspace's own DNS answer and its destination address are
// never used).
func (s *Service) dialName(ctx context.Context, p Policy, name string, port uint16) (net.Conn, netip.AddrPort, *refusal) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.DialTimeout+lookupSlack)
	defer cancel()
	addrs, err := s.res.lookup(ctx, name)
	if err != nil {
		return nil, netip.AddrPort{}, &refusal{fmt.Sprintf("%s does not resolve: %v", name, err)}
	}
	var why *refusal
	tried := 0
	for _, a := range addrs {
		ap := netip.AddrPortFrom(a, port)
		if r := s.check(p, ap, name); r != nil {
			if why == nil {
				why = r
			}
			continue
		}
		if tried++; tried > 4 {
			break
		}
		up, err := s.cfg.Dial(ctx, ap)
		if err == nil {
			return up, ap, nil
		}
		why = &refusal{fmt.Sprintf("%s (%s): %v", name, ap, err)}
	}
	if why == nil {
		why = &refusal{name + " has no address"}
	}
	return nil, netip.AddrPort{}, why
}

// pipe connects to dst (unless up is given) and carries the bytes both
// ways: first the ones already read from the client (replay), then
// whatever comes, spliced by the kernel between the two sockets.
func (s *Service) pipe(ctx context.Context, m *member, f *flow, dst netip.AddrPort, replay []byte, name string) {
	up, err := s.cfg.Dial(ctx, dst)
	if err != nil {
		s.log.Debug("egress proxy: dial", "workspace_id", m.id, "dst", dst, "err", err)
		reset(f.client)
		return
	}
	s.carry(m, f, up, dst, name, replay)
}

// carry records the upstream connection, checks the policy once more (it
// may have changed meanwhile) and copies both ways until both end.
func (s *Service) carry(m *member, f *flow, up net.Conn, dst netip.AddrPort, name string, replay []byte) {
	s.mu.Lock()
	f.dst, f.name = dst, name
	r := s.check(m.policy, dst, name)
	s.mu.Unlock()
	if r != nil || !f.setUp(up) {
		up.Close()
		reset(f.client)
		return
	}
	if len(replay) > 0 {
		_ = up.SetWriteDeadline(time.Now().Add(s.cfg.DialTimeout))
		if _, err := up.Write(replay); err != nil {
			f.close()
			return
		}
		_ = up.SetWriteDeadline(time.Time{})
	}
	splice(f.client, up, f.client, f)
}

// splice copies from src (the client, or what reads it) to up and from up
// to the client, half-closing each way as it ends; an error cuts both.
func splice(src io.Reader, up net.Conn, c *net.TCPConn, f *flow) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := io.Copy(c, up); err != nil {
			f.close()
			return
		}
		_ = c.CloseWrite()
	}()
	if _, err := io.Copy(up, src); err != nil {
		f.close()
	} else if cw, ok := up.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	<-done
}
