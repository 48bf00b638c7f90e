package egress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Config configures a Service. Zero values take the defaults noted.
type Config struct {
	// Gateway is the address the proxy and the DNS server listen on: the
	// gateway of the workspaces' bridge, where the firewall rules send
	// their traffic. Required.
	Gateway netip.Addr
	// ProxyPort and DNSPort are the ports to listen on (0: any free one;
	// the firewall rules name the ones in use).
	ProxyPort, DNSPort int
	// Subnet is the workspaces' network: never reachable through the proxy,
	// whatever a policy says (other workspaces are on it).
	Subnet netip.Prefix
	// Upstream is the DNS server names are resolved with (host:port).
	// Required.
	Upstream string
	// PeekTimeout bounds the wait for a client's first bytes when a name
	// must be read from them (300 ms): a protocol where the server speaks
	// first is matched by address only.
	PeekTimeout time.Duration
	// DialTimeout bounds connecting to an upstream address (5 s).
	DialTimeout time.Duration
	// MaxConns bounds the connections open through the proxy per workspace
	// (1024) and in all (16384).
	MaxConns, MaxConnsTotal int
	// Refused receives refused connections and queries, at most EventBurst
	// at once per workspace and then one per EventEvery (20, 1 s); the
	// others are counted in the next one's Dropped.
	Refused    func(workspaceID string, r Refusal)
	EventBurst int
	EventEvery time.Duration
	// TLS, when set, may take over TLS connections (see TLSHook).
	TLS TLSHook
	// OriginalDst reads a redirected connection's original destination
	// (default: SO_ORIGINAL_DST; tests replace it).
	OriginalDst func(*net.TCPConn) (netip.AddrPort, error)
	// Dial connects to an upstream address (default: net.Dialer with
	// DialTimeout; tests replace it).
	Dial   func(ctx context.Context, addr netip.AddrPort) (net.Conn, error)
	Logger *slog.Logger
}

// Refusal is a refused connection or DNS query.
type Refusal struct {
	// Dest is what was asked for: "10.0.0.5:5432", "evil.test:443
	// (203.0.113.10:443)", "evil.test (DNS)".
	Dest string
	// Rule says why it was refused: "network none", "not in the allow
	// list", "private address (10.0.0.0/8)".
	Rule string
	// Dropped counts the refusals not reported since the last one.
	Dropped int64
}

// TLSHook may take over TLS connections that the policy allows, to add
// what the workspace must not hold (credentials) to its requests: a
// TLS-terminating hook per (workspace, host). It is asked only about
// connections already allowed; whatever it does, it reaches the server
// only through dial, which connects to an address the policy allows (the
// one the workspace connected to when it was allowed by address, else the
// name resolved by the proxy), checked again at each dial. The
// connections dial makes belong to the client's: they are re-checked when
// the policy changes and cut with it.
type TLSHook interface {
	// Wants reports whether any TLS connection of the workspace may be
	// taken over (the proxy then reads the server name in every mode).
	Wants(workspaceID string) bool
	// HandleTLS is called with a connection whose ClientHello named
	// serverName. client replays the ClientHello first. It returns false
	// (having read nothing more from client) to let the proxy tunnel the
	// connection untouched, or true once it has served it; it then owns
	// client and closes it.
	HandleTLS(ctx context.Context, workspaceID, serverName string, client net.Conn, dial func(context.Context) (net.Conn, error)) bool
}

func (c Config) withDefaults() Config {
	if c.PeekTimeout == 0 {
		c.PeekTimeout = 300 * time.Millisecond
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = 5 * time.Second
	}
	if c.MaxConns == 0 {
		c.MaxConns = 1024
	}
	if c.MaxConnsTotal == 0 {
		c.MaxConnsTotal = 16384
	}
	if c.EventBurst == 0 {
		c.EventBurst = 20
	}
	if c.EventEvery == 0 {
		c.EventEvery = time.Second
	}
	if c.OriginalDst == nil {
		c.OriginalDst = originalDst
	}
	if c.Dial == nil {
		timeout := c.DialTimeout
		c.Dial = func(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
			d := net.Dialer{Timeout: timeout}
			return d.DialContext(ctx, "tcp", addr.String())
		}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Service is the proxy and the DNS server of one sidecar's workspaces.
// New, Start, then Set each workspace's address and policy; Close.
type Service struct {
	cfg   Config
	log   *slog.Logger
	res   *resolver
	hosts atomic.Pointer[map[netip.Addr]bool]

	mu     sync.RWMutex
	byAddr map[netip.Addr]*member
	byID   map[string]*member
	total  int

	ln   *net.TCPListener
	dns  *dnsServer
	stop context.CancelFunc
	wg   sync.WaitGroup
}

// member is a workspace as the proxy knows it.
type member struct {
	id     string
	addr   netip.Addr
	policy Policy
	flows  map[*flow]struct{}
	events *limiter
}

// New prepares a Service; nothing listens yet.
func New(cfg Config) (*Service, error) {
	cfg = cfg.withDefaults()
	if !cfg.Gateway.IsValid() {
		return nil, errors.New("egress: a gateway address is required")
	}
	if cfg.Upstream == "" {
		return nil, errors.New("egress: an upstream DNS server is required")
	}
	s := &Service{
		cfg:    cfg,
		log:    cfg.Logger.With("component", "egress"),
		byAddr: map[netip.Addr]*member{},
		byID:   map[string]*member{},
	}
	s.res = newResolver(cfg.Upstream, 4096)
	return s, nil
}

// Start listens on the gateway (the proxy on TCP, the DNS server on UDP
// and TCP) and serves until Close.
func (s *Service) Start() error {
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	s.refreshHosts()
	ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(netip.AddrPortFrom(s.cfg.Gateway, uint16(s.cfg.ProxyPort))))
	if err != nil {
		stop()
		return fmt.Errorf("egress proxy: listen on %s: %w", s.cfg.Gateway, err)
	}
	s.ln = ln
	d, err := startDNS(s, netip.AddrPortFrom(s.cfg.Gateway, uint16(s.cfg.DNSPort)))
	if err != nil {
		ln.Close()
		stop()
		return err
	}
	s.dns = d
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		s.serve(ctx, ln)
	}()
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(hostsRefresh)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				s.refreshHosts()
			case <-ctx.Done():
				return
			}
		}
	}()
	s.log.Info("egress proxy listening", "proxy", ln.Addr().String(), "dns", d.addr.String(), "upstream_dns", s.cfg.Upstream)
	return nil
}

// ProxyPort and DNSPort are the ports in use (after Start).
func (s *Service) ProxyPort() int { return s.ln.Addr().(*net.TCPAddr).Port }

// DNSPort is the DNS server's port (UDP and TCP).
func (s *Service) DNSPort() int { return int(s.dns.addr.Port()) }

// Close stops listening and cuts every connection through the proxy.
func (s *Service) Close() {
	if s.stop == nil {
		return
	}
	s.stop()
	s.ln.Close()
	s.dns.close()
	s.mu.Lock()
	var flows []*flow
	for _, m := range s.byID {
		for f := range m.flows {
			flows = append(flows, f)
		}
	}
	s.mu.Unlock()
	for _, f := range flows {
		f.close()
	}
	s.wg.Wait()
}

// Set says that workspace id is at addr and holds it to p: connections it
// opened that p does not allow are cut. Another workspace that had addr
// loses it.
func (s *Service) Set(id string, addr netip.Addr, p Policy) {
	addr = addr.Unmap()
	var cut []*flow
	s.mu.Lock()
	m := s.byID[id]
	if m == nil {
		m = &member{id: id, flows: map[*flow]struct{}{}}
		m.events = newLimiter(s.cfg.EventBurst, s.cfg.EventEvery)
		s.byID[id] = m
	}
	if m.addr.IsValid() && m.addr != addr && s.byAddr[m.addr] == m {
		delete(s.byAddr, m.addr)
	}
	if old := s.byAddr[addr]; old != nil && old != m {
		old.addr = netip.Addr{}
		for f := range old.flows {
			cut = append(cut, f)
		}
	}
	if addr.IsValid() {
		s.byAddr[addr] = m
	}
	m.addr, m.policy = addr, p
	for f := range m.flows {
		// A flow still deciding (no upstream yet) is checked against the
		// policy of the moment when it gets one (carry).
		if f.dst.IsValid() && s.check(p, f.dst, f.name) != nil {
			cut = append(cut, f)
		}
	}
	s.mu.Unlock()
	for _, f := range cut {
		f.close()
	}
	if len(cut) > 0 {
		s.log.Info("cut connections the workspace's policy no longer allows", "workspace_id", id, "connections", len(cut))
	}
}

// Forget drops a workspace (stopped or deleted) and cuts its connections.
func (s *Service) Forget(id string) {
	s.mu.Lock()
	m := s.byID[id]
	if m != nil {
		delete(s.byID, id)
		if s.byAddr[m.addr] == m {
			delete(s.byAddr, m.addr)
		}
	}
	s.mu.Unlock()
	if m == nil {
		return
	}
	for _, f := range m.flowList(&s.mu) {
		f.close()
	}
}

func (m *member) flowList(mu *sync.RWMutex) []*flow {
	mu.Lock()
	defer mu.Unlock()
	out := make([]*flow, 0, len(m.flows))
	for f := range m.flows {
		out = append(out, f)
	}
	return out
}

// lookup finds the workspace at a source address, and its policy now.
func (s *Service) lookup(addr netip.Addr) (*member, Policy, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m := s.byAddr[addr.Unmap()]
	if m == nil {
		return nil, Policy{}, false
	}
	return m, m.policy, true
}

// refused reports a refusal, rate-limited per workspace.
func (s *Service) refused(m *member, dest, rule string) {
	s.log.Debug("refused", "workspace_id", m.id, "dest", dest, "rule", rule)
	if s.cfg.Refused == nil {
		return
	}
	ok, dropped := m.events.take()
	if ok {
		s.cfg.Refused(m.id, Refusal{Dest: dest, Rule: rule, Dropped: dropped})
	}
}

func (s *Service) refreshHosts() {
	set := map[netip.Addr]bool{}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok {
					set[ip.Unmap()] = true
				}
			}
		}
	}
	set[s.cfg.Gateway] = true
	s.hosts.Store(&set)
}

// refusal is why a destination is refused.
type refusal struct{ rule string }

func (r *refusal) Error() string { return r.rule }

// check says whether p lets a workspace reach dst, reached by name (""
// when matched by address): nil, or why not.
func (s *Service) check(p Policy, dst netip.AddrPort, name string) *refusal {
	a := dst.Addr().Unmap().WithZone("")
	if hosts := s.hosts.Load(); hosts != nil && (*hosts)[a] {
		return &refusal{"the host's own address"}
	}
	if s.cfg.Subnet.IsValid() && s.cfg.Subnet.Contains(a) {
		return &refusal{"the workspaces' network (another workspace, or the gateway)"}
	}
	c, why := classify(a)
	switch p.Mode {
	case ModeOpen:
		if c != reachable {
			return &refusal{"mode open: " + why + " address"}
		}
		return nil
	case ModeAllow:
		if c == never {
			return &refusal{why + " address"}
		}
		if _, ok := p.MatchAddr(a, dst.Port()); ok {
			return nil
		}
		if name == "" {
			return &refusal{"not in the allow list"}
		}
		if _, ok := p.MatchName(name, dst.Port()); !ok {
			return &refusal{"not in the allow list"}
		}
		if c == guarded {
			return &refusal{fmt.Sprintf("%s resolves to a %s address (%s), which only an address rule may allow", name, why, a)}
		}
		return nil
	}
	return &refusal{"network none"}
}

// limiter lets events through in bursts, counting the ones it holds back.
type limiter struct {
	mu      sync.Mutex
	tokens  float64
	burst   float64
	every   time.Duration
	last    time.Time
	dropped int64
}

func newLimiter(burst int, every time.Duration) *limiter {
	return &limiter{tokens: float64(burst), burst: float64(burst), every: every, last: time.Now()}
}

func (l *limiter) take() (bool, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	l.tokens = min(l.burst, l.tokens+float64(now.Sub(l.last))/float64(l.every))
	l.last = now
	if l.tokens < 1 {
		l.dropped++
		return false, 0
	}
	l.tokens--
	d := l.dropped
	l.dropped = 0
	return true, d
}
