package egress

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// dnsServer answers workspaces' DNS queries by their policies: it forwards
// what may be asked to the upstream server and keeps out of the answers
// the addresses a workspace may not reach.
type dnsServer struct {
	s    *Service
	addr netip.AddrPort
	udp  *dns.Server
	tcp  *dns.Server
	wg   sync.WaitGroup
}

// maxDNSInFlight bounds the queries forwarded at once.
const maxDNSInFlight = 256

func startDNS(s *Service, at netip.AddrPort) (*dnsServer, error) {
	d := &dnsServer{s: s}
	// UDP and TCP on the same port: the TCP port is found first.
	tl, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(at))
	if err != nil {
		return nil, fmt.Errorf("egress DNS: listen on %s: %w", at, err)
	}
	port := tl.Addr().(*net.TCPAddr).Port
	ul, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(at.Addr(), uint16(port))))
	if err != nil {
		tl.Close()
		return nil, fmt.Errorf("egress DNS: listen on %s udp: %w", at, err)
	}
	d.addr = netip.AddrPortFrom(at.Addr(), uint16(port))
	sem := make(chan struct{}, maxDNSInFlight)
	h := dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		select {
		case sem <- struct{}{}:
			defer func() { <-sem }()
			d.answer(w, q)
		default:
			m := new(dns.Msg)
			m.SetRcode(q, dns.RcodeServerFailure)
			_ = w.WriteMsg(m)
		}
	})
	d.udp = &dns.Server{PacketConn: ul, Handler: h}
	d.tcp = &dns.Server{Listener: tl, Handler: h, ReadTimeout: dnsTCPReadWait, WriteTimeout: dnsTCPWriteWait, IdleTimeout: func() time.Duration { return dnsTCPIdle }}
	for _, srv := range []*dns.Server{d.udp, d.tcp} {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			_ = srv.ActivateAndServe()
		}()
	}
	return d, nil
}

func (d *dnsServer) close() {
	_ = d.udp.Shutdown()
	_ = d.tcp.Shutdown()
	d.wg.Wait()
}

// answer answers one query.
func (d *dnsServer) answer(w dns.ResponseWriter, q *dns.Msg) {
	reply := func(rcode int) {
		m := new(dns.Msg)
		m.SetRcode(q, rcode)
		_ = w.WriteMsg(m)
	}
	src, ok := netip.AddrFromSlice(addrIP(w.RemoteAddr()))
	if !ok {
		reply(dns.RcodeRefused)
		return
	}
	m, p, ok := d.s.lookup(src)
	if !ok || len(q.Question) != 1 || q.Opcode != dns.OpcodeQuery {
		reply(dns.RcodeRefused)
		return
	}
	qn := q.Question[0]
	name := strings.ToLower(strings.TrimSuffix(qn.Name, "."))
	switch p.Mode {
	case ModeOpen:
	case ModeAllow:
		if _, ok := p.MatchName(name, 0); !ok {
			d.s.refused(m, name+" (DNS)", "not in the allow list")
			reply(dns.RcodeNameError)
			return
		}
	default:
		d.s.refused(m, name+" (DNS)", "network "+p.Mode)
		reply(dns.RcodeRefused)
		return
	}
	network := "udp"
	if _, isTCP := w.RemoteAddr().(*net.TCPAddr); isTCP {
		network = "tcp"
	}
	fwd := q.Copy()
	fwd.Id = dns.Id()
	ctx, cancel := context.WithTimeout(context.Background(), queryWait)
	defer cancel()
	resp, err := exchange(ctx, d.s.cfg.Upstream, fwd, network)
	if err != nil {
		reply(dns.RcodeServerFailure)
		return
	}
	resp.Id = q.Id
	var dropped []string
	resp.Answer, dropped = d.filter(p, name, resp.Answer, dropped)
	resp.Extra, dropped = d.filter(p, name, resp.Extra, dropped)
	if len(dropped) > 0 {
		d.s.refused(m, name+" (DNS)", "its answer named addresses the policy forbids, left out: "+strings.Join(dropped, ", "))
	}
	_ = w.WriteMsg(resp)
}

// filter leaves out of rrs the addresses p does not let the workspace
// reach (matched for name, on any port).
func (d *dnsServer) filter(p Policy, name string, rrs []dns.RR, dropped []string) ([]dns.RR, []string) {
	out := rrs[:0]
	for _, rr := range rrs {
		var ip net.IP
		switch v := rr.(type) {
		case *dns.A:
			ip = v.A
		case *dns.AAAA:
			ip = v.AAAA
		default:
			out = append(out, rr)
			continue
		}
		a, ok := netip.AddrFromSlice(ip)
		if !ok {
			continue
		}
		a = a.Unmap()
		if d.allowedAnswer(p, a) {
			out = append(out, rr)
		} else if len(dropped) < 8 {
			dropped = append(dropped, a.String())
		}
	}
	return out, dropped
}

// allowedAnswer: an address a name may resolve to for a workspace (on
// some port).
func (d *dnsServer) allowedAnswer(p Policy, a netip.Addr) bool {
	if !d.s.hardOK(a) {
		return false
	}
	switch c, _ := classify(a); c {
	case reachable:
		return true
	case guarded:
		_, ok := p.MatchAddr(a, 0)
		return ok
	}
	return false
}

// hardOK: a is neither the host's nor on the workspaces' network.
func (s *Service) hardOK(a netip.Addr) bool {
	if hosts := s.hosts.Load(); hosts != nil && (*hosts)[a] {
		return false
	}
	return !(s.cfg.Subnet.IsValid() && s.cfg.Subnet.Contains(a))
}

func addrIP(a net.Addr) net.IP {
	switch v := a.(type) {
	case *net.UDPAddr:
		return v.IP
	case *net.TCPAddr:
		return v.IP
	}
	return nil
}
