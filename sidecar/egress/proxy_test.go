package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// testNet is a proxy on the loopback: workspaces connect to it directly
// (no firewall), the destination they "asked for" is set by the test, and
// the upstream addresses of the test's "internet" lead to servers on the
// loopback.
type testNet struct {
	t      *testing.T
	svc    *Service
	mu     sync.Mutex
	next   netip.AddrPort
	routes map[netip.Addr]bool // addresses that lead to 127.0.0.1
	events chan string
}

var testZone = map[string][]string{
	"allowed.test.":   {"203.0.113.10"},
	"other.test.":     {"203.0.113.10"},
	"a.wild.test.":    {"203.0.113.10"},
	"evil.test.":      {"10.0.0.1"},
	"meta.test.":      {"169.254.169.254"},
	"v6.test.":        {"2001:db8::10"},
	"v6evil.test.":    {"fd00::1", "::ffff:127.0.0.1"},
	"mixed.test.":     {"10.0.0.1", "203.0.113.10"},
	"loop.test.":      {"127.0.0.1"},
	"nat64meta.test.": {"64:ff9b::a9fe:a9fe"},
}

// startTestDNS serves testZone.
func startTestDNS(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		qn := q.Question[0]
		addrs, ok := testZone[strings.ToLower(qn.Name)]
		if !ok {
			m.SetRcode(q, dns.RcodeNameError)
		}
		for _, a := range addrs {
			ip := netip.MustParseAddr(a)
			hdr := dns.RR_Header{Name: qn.Name, Class: dns.ClassINET, Ttl: 60}
			switch {
			case ip.Is4() && qn.Qtype == dns.TypeA:
				hdr.Rrtype = dns.TypeA
				m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: ip.AsSlice()})
			case ip.Is6() && qn.Qtype == dns.TypeAAAA:
				hdr.Rrtype = dns.TypeAAAA
				m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr, AAAA: ip.AsSlice()})
			}
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return pc.LocalAddr().String()
}

func newTestNet(t *testing.T) *testNet { return newTestNetWith(t, nil) }

// newTestNetWith is newTestNet with its config changed by edit.
func newTestNetWith(t *testing.T, edit func(*Config)) *testNet {
	t.Helper()
	n := &testNet{t: t, events: make(chan string, 100), routes: map[netip.Addr]bool{
		netip.MustParseAddr("203.0.113.10"): true, netip.MustParseAddr("2001:db8::10"): true,
		netip.MustParseAddr("10.0.0.1"): true,
	}}
	cfg := Config{
		Gateway:     netip.MustParseAddr("127.0.0.1"),
		Subnet:      netip.MustParsePrefix("10.213.7.0/24"),
		Upstream:    startTestDNS(t),
		PeekTimeout: 200 * time.Millisecond,
		EventBurst:  1000,
		OriginalDst: func(*net.TCPConn) (netip.AddrPort, error) {
			n.mu.Lock()
			defer n.mu.Unlock()
			return n.next, nil
		},
		Dial: func(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
			if !n.routes[ap.Addr()] {
				return nil, fmt.Errorf("no route to %s in this test", ap)
			}
			var d net.Dialer
			return d.DialContext(ctx, "tcp", netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), ap.Port()).String())
		},
		Refused: func(id string, r Refusal) { n.events <- id + ": " + r.Dest + ": " + r.Rule },
	}
	if edit != nil {
		edit(&cfg)
	}
	svc, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	n.svc = svc
	return n
}

// dial connects "from workspace at src" to "dst".
func (n *testNet) dial(src, dst string) net.Conn {
	n.t.Helper()
	n.mu.Lock()
	n.next = netip.MustParseAddrPort(dst)
	n.mu.Unlock()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", n.svc.ProxyPort()))
	if err != nil {
		// Refused so fast that the connect itself saw the reset.
		a, b := net.Pipe()
		b.Close()
		return a
	}
	n.t.Cleanup(func() { c.Close() })
	return c
}

func (n *testNet) set(mode string, allow ...string) {
	n.t.Helper()
	p, err := Parse(mode, allow)
	if err != nil {
		n.t.Fatal(err)
	}
	n.svc.Set("ws1", netip.MustParseAddr("127.0.0.1"), p)
}

// event waits for a refusal event containing want.
func (n *testNet) event(want string) {
	n.t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case e := <-n.events:
			if strings.Contains(e, want) {
				return
			}
		case <-deadline:
			n.t.Fatalf("no refusal event with %q", want)
		}
	}
}

// get sends an HTTP GET for host over c and returns the status and body.
func get(t *testing.T, c net.Conn, host string) (int, string, http.Header) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", host)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err.Error(), nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// tlsGet makes an HTTPS request over c with server name sni.
func tlsGet(t *testing.T, c net.Conn, sni string) (string, error) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	tc := tls.Client(c, &tls.Config{ServerName: sni, InsecureSkipVerify: true})
	if err := tc.Handshake(); err != nil {
		return "", err
	}
	fmt.Fprintf(tc, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", sni)
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// servers on the loopback: plain HTTP, HTTPS, and one that streams forever.
func servers(t *testing.T) (httpPort, tlsPort, slowPort uint16) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "hello %s", r.Host) })
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	ts := httptest.NewTLSServer(h)
	t.Cleanup(ts.Close)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for r.Context().Err() == nil {
			if _, err := w.Write(make([]byte, 1024)); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			time.Sleep(10 * time.Millisecond)
		}
	}))
	t.Cleanup(slow.Close)
	port := func(u string) uint16 {
		return netip.MustParseAddrPort(strings.TrimPrefix(strings.TrimPrefix(u, "http://"), "https://")).Port()
	}
	return port(hs.URL), port(ts.URL), port(slow.URL)
}

func isReset(t *testing.T, c net.Conn) bool {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	_, _ = c.Write([]byte("\x00"))
	_, err := c.Read(make([]byte, 1))
	return err != nil && !strings.Contains(err.Error(), "timeout")
}

func TestProxyOpen(t *testing.T) {
	n := newTestNet(t)
	httpPort, tlsPort, _ := servers(t)
	n.set("open")
	at := func(a string, p uint16) string { return netip.AddrPortFrom(netip.MustParseAddr(a), p).String() }
	if code, body, _ := get(t, n.dial("127.0.0.1", at("203.0.113.10", httpPort)), "anything.test"); code != 200 || body != "hello anything.test" {
		t.Fatalf("open: the internet: exp 200, got %d %q", code, body)
	}
	if body, err := tlsGet(t, n.dial("127.0.0.1", at("203.0.113.10", tlsPort)), "whatever.test"); err != nil || !strings.HasPrefix(body, "hello") {
		t.Fatalf("open: TLS to the internet: %q %v", body, err)
	}
	for _, dst := range []string{"10.0.0.1", "169.254.169.254", "127.0.0.1", "10.213.7.9", "192.168.1.1", "100.100.100.200"} {
		code, body, hdr := get(t, n.dial("127.0.0.1", at(dst, httpPort)), "x.test")
		if code != 403 || !strings.Contains(body, "network policy") || hdr.Get("X-Patina-Refused") == "" {
			t.Fatalf("open: %s: exp a 403 naming the policy, got %d %q", dst, code, body)
		}
		n.event(dst)
	}
	if !isReset(t, n.dial("127.0.0.1", at("10.0.0.1", 5432))) {
		t.Fatal("open: a non-HTTP connection to a private address was not reset")
	}
	// An address that is no workspace's gets nothing.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	if c, err := d.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", n.svc.ProxyPort())); err == nil && !isReset(t, c) {
		t.Fatal("a connection from an unknown address was carried")
	}
}

func TestProxyAllow(t *testing.T) {
	n := newTestNet(t)
	httpPort, tlsPort, _ := servers(t)
	n.set("allow", "allowed.test", "*.wild.test", "evil.test", "mixed.test", "v6.test", "meta.test")
	// The destination address the workspace used is never used for a
	// name: 198.51.100.1 leads nowhere in this test.
	nowhere := func(p uint16) string { return netip.AddrPortFrom(netip.MustParseAddr("198.51.100.1"), p).String() }
	for _, sni := range []string{"allowed.test", "a.wild.test", "mixed.test", "v6.test"} {
		if body, err := tlsGet(t, n.dial("127.0.0.1", nowhere(tlsPort)), sni); err != nil || !strings.HasPrefix(body, "hello") {
			t.Fatalf("allow: TLS to %s: %q %v", sni, body, err)
		}
	}
	for _, tc := range []struct{ sni, event string }{
		{"other.test", "not in the allow list"},
		{"wild.test", "not in the allow list"},
		{"evil.test", "private"},
		{"meta.test", "link-local"},
		{"", "without a server name"},
	} {
		if _, err := tlsGet(t, n.dial("127.0.0.1", nowhere(tlsPort)), tc.sni); err == nil {
			t.Fatalf("allow: TLS with server name %q went through", tc.sni)
		}
		n.event(tc.event)
	}
	// An address as server name (Go's client never sends one: by hand).
	c := n.dial("127.0.0.1", nowhere(tlsPort))
	c.Write(ClientHello("203.0.113.10"))
	if !isReset(t, c) {
		t.Fatal("allow: an address as TLS server name went through")
	}
	n.event("not a DNS name")
	if code, body, _ := get(t, n.dial("127.0.0.1", nowhere(httpPort)), "allowed.test"); code != 200 || body != "hello allowed.test" {
		t.Fatalf("allow: HTTP to an allowed Host: %d %q", code, body)
	}
	if code, body, _ := get(t, n.dial("127.0.0.1", nowhere(httpPort)), "other.test"); code != 403 || !strings.Contains(body, "not in the allow list") {
		t.Fatalf("allow: HTTP to another Host: exp 403, got %d %q", code, body)
	}
	// Tricks: CONNECT, a proxy request, HTTP/2 prior knowledge, a second
	// request for another host on the same connection.
	for _, raw := range []string{
		"CONNECT other.test:443 HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
		"GET http://other.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
		"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
	} {
		c := n.dial("127.0.0.1", nowhere(httpPort))
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, raw)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 403 {
			t.Fatalf("allow: %q: exp 403, got %v %v", raw, resp, err)
		}
	}
	c = n.dial("127.0.0.1", nowhere(httpPort))
	if code, _, _ := get(t, c, "allowed.test"); code != 200 {
		t.Fatalf("allow: keep-alive first request: %d", code)
	}
	if code, body, _ := get(t, c, "other.test"); code == 200 {
		t.Fatalf("allow: a second request for another host went through: %q", body)
	}
	n.event("another host than the connection's first request")
	// h2c upgrade is taken out; the request itself goes through.
	c = n.dial("127.0.0.1", nowhere(httpPort))
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: allowed.test\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n")
	if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("allow: an h2c upgrade request: %v %v", resp, err)
	}
	// A server-first or unknown protocol to an address not listed: refused.
	if !isReset(t, n.dial("127.0.0.1", nowhere(5432))) {
		t.Fatal("allow: an unmatched connection was not refused")
	}
	// An address rule: the connection goes to the address asked for.
	n.set("allow", "10.0.0.1:"+fmt.Sprint(httpPort))
	if code, _, _ := get(t, n.dial("127.0.0.1", netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), httpPort).String()), "anything"); code != 200 {
		t.Fatalf("allow: an address rule: %d", code)
	}
	if !isReset(t, n.dial("127.0.0.1", netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), tlsPort).String())) {
		t.Fatal("allow: the address rule's port was not enforced")
	}
	n.set("none")
	if !isReset(t, n.dial("127.0.0.1", nowhere(tlsPort))) {
		t.Fatal("none: a connection was carried")
	}
}

// A policy change cuts the connections it no longer allows, at once, and
// leaves the others.
func TestProxyPolicyChangeCuts(t *testing.T) {
	n := newTestNet(t)
	_, _, slowPort := servers(t)
	n.set("allow", "allowed.test", "other.test")
	dst := netip.AddrPortFrom(netip.MustParseAddr("198.51.100.1"), slowPort).String()
	start := func(host string) *bufio.Reader {
		c := n.dial("127.0.0.1", dst)
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", host)
		br := bufio.NewReader(c)
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := br.Peek(2048); err != nil {
			t.Fatalf("download from %s: %v", host, err)
		}
		return br
	}
	cut, kept := start("allowed.test"), start("other.test")
	n.set("allow", "other.test")
	t0 := time.Now()
	if _, err := io.Copy(io.Discard, cut); err == nil || time.Since(t0) > 3*time.Second {
		t.Fatalf("the download no longer allowed was not cut at once: %v after %s", err, time.Since(t0))
	}
	if _, err := io.CopyN(io.Discard, kept, 64<<10); err != nil {
		t.Fatalf("the download still allowed was cut: %v", err)
	}
}

func TestDNSPolicy(t *testing.T) {
	n := newTestNet(t)
	ask := func(name string, qt uint16) (*dns.Msg, error) {
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(name), qt)
		c := &dns.Client{Timeout: 3 * time.Second, Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP("127.0.0.1")}}}
		r, _, err := c.Exchange(m, fmt.Sprintf("127.0.0.1:%d", n.svc.DNSPort()))
		return r, err
	}
	answers := func(r *dns.Msg) []string {
		var out []string
		for _, rr := range r.Answer {
			switch v := rr.(type) {
			case *dns.A:
				out = append(out, v.A.String())
			case *dns.AAAA:
				out = append(out, v.AAAA.String())
			}
		}
		return out
	}
	n.set("open")
	for _, tc := range []struct {
		name string
		qt   uint16
		exp  string
	}{
		{"allowed.test", dns.TypeA, "203.0.113.10"},
		{"evil.test", dns.TypeA, ""},
		{"meta.test", dns.TypeA, ""},
		{"mixed.test", dns.TypeA, "203.0.113.10"},
		{"v6.test", dns.TypeAAAA, "2001:db8::10"},
		{"v6evil.test", dns.TypeAAAA, ""},
		{"nat64meta.test", dns.TypeAAAA, ""},
		{"loop.test", dns.TypeA, ""},
	} {
		r, err := ask(tc.name, tc.qt)
		if err != nil || strings.Join(answers(r), ",") != tc.exp {
			t.Errorf("open: %s: exp %q, got %v %v", tc.name, tc.exp, r, err)
		}
	}
	n.set("allow", "allowed.test", "evil.test", "10.0.0.0/8")
	if r, err := ask("other.test", dns.TypeA); err != nil || r.Rcode != dns.RcodeNameError {
		t.Fatalf("allow: a name not listed: exp NXDOMAIN, got %v %v", r, err)
	}
	n.event("other.test (DNS)")
	if r, err := ask("evil.test", dns.TypeA); err != nil || strings.Join(answers(r), ",") != "10.0.0.1" {
		t.Fatalf("allow: a listed name on a listed private range: %v %v", r, err)
	}
	n.set("allow", "evil.test")
	if r, err := ask("evil.test", dns.TypeA); err != nil || len(answers(r)) != 0 {
		t.Fatalf("allow: a listed name on a private address: exp no address, got %v %v", r, err)
	}
	n.event("left out: 10.0.0.1")
	n.set("none")
	if r, err := ask("allowed.test", dns.TypeA); err != nil || r.Rcode != dns.RcodeRefused {
		t.Fatalf("none: exp REFUSED, got %v %v", r, err)
	}
}

func FuzzParseHead(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
		"PRI * HTTP/2.0\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := readHead(bufio.NewReaderSize(strings.NewReader(string(b)), maxHeadLine))
		if err != nil {
			return
		}
		if h.chunked && h.length != 0 {
			t.Fatalf("both chunked and a length: %q", b)
		}
	})
}
