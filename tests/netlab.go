package tests

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"
)

// NetLab is a small world of network hosts on this machine, for the
// network policy tests, all in one network namespace joined to the host by
// a veth pair and routed from the host (never a real outside address):
//
//   - "the internet": 203.0.113.10 and 2001:db8:7::10 (documentation
//     ranges; only 203.0.113.0/28 is routed to the lab: machines of this
//     kind reach their Go module proxy and Debian mirror at 203.0.113.80,
//     through their default route, and must keep reaching them while a
//     lab lives), with HTTP on 8080, HTTPS on 8443 (/slow streams without
//     end), an SSH-like banner on 2222, a UDP echo on 9999, and a DNS
//     server of its own on 53 that answers every name with 6.6.6.6;
//   - "the LAN": 10.251.0.10, with HTTP on 8080 and HTTPS on 8443 and a
//     database-like banner on 5432;
//   - "metadata": 169.254.169.254, HTTP on 80 (a route for that one
//     address points at the namespace while the lab lives);
//   - "the host": an HTTP server on 0.0.0.0 of the host itself (HostPort);
//   - a DNS server on the host's loopback (DNS) for the sidecar's --dns,
//     answering the test names of Zone.
//
// Each server answers with its role ("internet", "lan", "metadata",
// "host", "internet6"). One lab at a time per machine (a lock file):
// the addresses are fixed.
type NetLab struct {
	NS       string // the namespace's name
	DNS      string // host:port of the test DNS server
	HostPort int    // the host's own server, on every address
	nsPath   string
}

// Zone is what the lab's DNS server (the sidecar's upstream) answers.
var Zone = map[string][]string{
	"allowed.test":  {"203.0.113.10"},
	"other.test":    {"203.0.113.10"},
	"a.wild.test":   {"203.0.113.10"},
	"b.a.wild.test": {"203.0.113.10"},
	"evil.test":     {"10.251.0.10"},
	"meta.test":     {"169.254.169.254"},
	"v6only.test":   {"203.0.113.9", "2001:db8:7::10"},
	"v6evil.test":   {"fd00:ec2::254", "::ffff:169.254.169.254"},
	"hostname.test": {"127.0.0.1"},
	// A secret's host (tests/secrets_test.go): its server is on 9443.
	"api.secret.test": {"203.0.113.10"},
}

// StartNetLab builds the lab, or fails the test; it is taken down at the
// end of the test.
func StartNetLab(t *testing.T) *NetLab {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the network lab needs root (network namespaces)")
	}
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "patina-netlab.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Close() })
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	tag := hex.EncodeToString(b)
	l := &NetLab{NS: "ptlab" + tag, nsPath: "/run/netns/ptlab" + tag}
	host, peer := "ptlh"+tag, "ptlc"+tag
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	inNS := func(args ...string) { ip(append([]string{"-n", l.NS}, args...)...) }
	// Leftovers of a lab that was killed: its route to the metadata address.
	_ = exec.Command("ip", "route", "del", "169.254.169.254/32").Run()
	ip("netns", "add", l.NS)
	t.Cleanup(func() {
		_ = exec.Command("ip", "route", "del", "169.254.169.254/32", "dev", host).Run()
		_ = exec.Command("ip", "link", "del", host).Run()
		_ = exec.Command("ip", "netns", "del", l.NS).Run()
	})
	ip("link", "add", host, "type", "veth", "peer", "name", peer)
	ip("link", "set", peer, "netns", l.NS)
	ip("addr", "add", "203.0.113.1/28", "dev", host)
	ip("addr", "add", "10.251.0.1/24", "dev", host)
	ip("-6", "addr", "add", "2001:db8:7::1/64", "dev", host, "nodad")
	ip("link", "set", host, "up")
	ip("route", "add", "169.254.169.254/32", "dev", host)
	inNS("link", "set", "lo", "up")
	for _, a := range []string{"203.0.113.10/28", "10.251.0.10/24", "169.254.169.254/32"} {
		inNS("addr", "add", a, "dev", peer)
	}
	inNS("-6", "addr", "add", "2001:db8:7::10/64", "dev", peer, "nodad")
	inNS("link", "set", peer, "up")
	inNS("route", "add", "default", "via", "203.0.113.1")
	inNS("-6", "route", "add", "default", "via", "2001:db8:7::1")

	page := func(role string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/slow" {
				for r.Context().Err() == nil {
					if _, err := w.Write(make([]byte, 4096)); err != nil {
						return
					}
					w.(http.Flusher).Flush()
					time.Sleep(20 * time.Millisecond)
				}
				return
			}
			fmt.Fprint(w, role)
		})
	}
	serveHTTP := func(addr, role string, tlsToo bool) {
		srv := &httptest.Server{Listener: l.listen(t, "tcp", addr), Config: &http.Server{Handler: page(role)}}
		if tlsToo {
			srv.StartTLS()
		} else {
			srv.Start()
		}
		t.Cleanup(srv.Close)
	}
	serveHTTP("203.0.113.10:8080", "internet", false)
	serveHTTP("203.0.113.10:8443", "internet", true)
	serveHTTP("[2001:db8:7::10]:8443", "internet6", true)
	serveHTTP("10.251.0.10:8080", "lan", false)
	serveHTTP("10.251.0.10:8443", "lan", true)
	serveHTTP("169.254.169.254:80", "metadata", false)
	banner := func(addr, text string) {
		ln := l.listen(t, "tcp", addr)
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				_, _ = c.Write([]byte(text))
				time.AfterFunc(5*time.Second, func() { c.Close() })
			}
		}()
	}
	banner("203.0.113.10:2222", "SSH-2.0-internet\r\n")
	banner("10.251.0.10:5432", "lan-database\n")
	// UDP echo and a DNS server of the "internet"'s own.
	pc := l.listenPacket(t, "203.0.113.10:9999")
	go func() {
		b := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(b)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(append([]byte("echo "), b[:n]...), from)
		}
	}()
	hijack := &dns.Server{PacketConn: l.listenPacket(t, "203.0.113.10:53"), Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.ParseIP("6.6.6.6")})
		_ = w.WriteMsg(m)
	})}
	go func() { _ = hijack.ActivateAndServe() }()
	t.Cleanup(func() { _ = hijack.Shutdown() })

	// The host's own server, on every address, and the test DNS server.
	hl, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &httptest.Server{Listener: hl, Config: &http.Server{Handler: page("host")}}
	hs.Start()
	t.Cleanup(hs.Close)
	l.HostPort = hl.Addr().(*net.TCPAddr).Port
	dl, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ds := &dns.Server{PacketConn: dl, Handler: dns.HandlerFunc(answerZone)}
	go func() { _ = ds.ActivateAndServe() }()
	t.Cleanup(func() { _ = ds.Shutdown() })
	l.DNS = dl.LocalAddr().String()
	return l
}

func answerZone(w dns.ResponseWriter, q *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(q)
	qn := q.Question[0]
	addrs, ok := Zone[strings.ToLower(strings.TrimSuffix(qn.Name, "."))]
	if !ok {
		m.SetRcode(q, dns.RcodeNameError)
	}
	for _, a := range addrs {
		ip := netip.MustParseAddr(a)
		hdr := dns.RR_Header{Name: qn.Name, Class: dns.ClassINET, Ttl: 5}
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
}

// inNS runs fn on a thread inside the lab's namespace (a socket made there
// stays there).
func (l *NetLab) inNS(t *testing.T, fn func() error) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: a thread that failed to come back dies with the goroutine
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			errc <- err
			return
		}
		defer self.Close()
		ns, err := os.Open(l.nsPath)
		if err != nil {
			errc <- err
			return
		}
		defer ns.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		err = fn()
		if unix.Setns(int(self.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	if err := <-errc; err != nil {
		t.Fatalf("in namespace %s: %v", l.NS, err)
	}
}

func (l *NetLab) listen(t *testing.T, network, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	// The addresses may still be tentative a moment after they were added.
	deadline := time.Now().Add(5 * time.Second)
	l.inNS(t, func() error {
		for {
			var err error
			ln, err = net.Listen(network, addr)
			if err == nil || time.Now().After(deadline) {
				return err
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	return ln
}

func (l *NetLab) listenPacket(t *testing.T, addr string) net.PacketConn {
	t.Helper()
	var pc net.PacketConn
	l.inNS(t, func() (err error) {
		pc, err = net.ListenPacket("udp", addr)
		return err
	})
	return pc
}

// HostAddrs are this host's IPv4 addresses (every one must be out of a
// workspace's reach).
func HostAddrs(t *testing.T) []string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			out = append(out, n.IP.String())
		}
	}
	return out
}
