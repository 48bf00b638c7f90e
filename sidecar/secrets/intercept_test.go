package secrets

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// labCA makes a CA and a server certificate for names, as the real
// servers of a test have.
func labCA(t testing.TB, names ...string) (*x509.CertPool, tls.Certificate) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: "lab CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(der)
	lkey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ltmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	lder, err := x509.CreateCertificate(rand.Reader, ltmpl, caCert, &lkey.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return pool, tls.Certificate{Certificate: [][]byte{lder}, PrivateKey: lkey}
}

// seen is what a real server received.
type seen struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (s *seen) add(r *http.Request) {
	s.mu.Lock()
	s.reqs = append(s.reqs, r)
	s.mu.Unlock()
}

func (s *seen) last(t testing.TB) *http.Request {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reqs) == 0 {
		t.Fatal("the server saw no request")
	}
	return s.reqs[len(s.reqs)-1]
}

func (s *seen) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

// interceptRig is a Vault serving intercepted connections on a loopback
// listener (standing for the egress proxy), for workspace "ws1", every
// connection being for serverName; the real server is an HTTPS server
// with a certificate of its own lab CA.
type interceptRig struct {
	t          testing.TB
	v          *Vault
	labRoots   *x509.CertPool
	server     *httptest.Server
	seen       *seen
	addr       string
	serverName string
	declined   chan net.Conn
}

func newInterceptRig(t testing.TB, serverName string, roots bool) *interceptRig {
	t.Helper()
	pool, cert := labCA(t, "api.test", "other.test")
	s := &seen{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.add(r)
		if r.Header.Get("Upgrade") == "echo" {
			// A protocol of its own after a 101 (as a WebSocket): echo.
			c, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer c.Close()
			brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
			brw.Flush()
			_, _ = io.Copy(c, brw)
			return
		}
		if r.Method == http.MethodPost {
			// Answers at once, then streams: the request's body is read
			// first (golang/go#40747's race is then possible).
			b, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			w.WriteHeader(http.StatusOK)
			http.NewResponseController(w).Flush()
			time.Sleep(50 * time.Millisecond)
			fmt.Fprintf(w, "read %d bytes", len(b))
			return
		}
		fmt.Fprint(w, r.Host)
	}))
	srv.EnableHTTP2 = true
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	cfg := Config{StateDir: t.TempDir()}
	if roots {
		cfg.Roots = pool
	}
	v, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	rig := &interceptRig{t: t, v: v, labRoots: pool, server: srv, seen: s, addr: ln.Addr().String(), serverName: serverName, declined: make(chan net.Conn, 16)}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				dial := func(ctx context.Context) (net.Conn, error) {
					var d net.Dialer
					return d.DialContext(ctx, "tcp", srv.Listener.Addr().String())
				}
				if !v.HandleTLS(ctx, "ws1", serverName, c, dial) {
					rig.declined <- c
				}
			}()
		}
	}()
	return rig
}

// client is an HTTPS client of the workspace: it trusts the Vault's CA (as
// the bundle makes it) and reaches the rig's listener whatever the URL.
func (r *interceptRig) client(h2 bool) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(r.v.CACert())
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", r.addr)
		},
		TLSClientConfig:   &tls.Config{RootCAs: pool},
		ForceAttemptHTTP2: h2,
	}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	r.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func (r *interceptRig) get(c *http.Client, url string, hdr map[string]string) (int, string) {
	r.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Proto + " " + string(b)
}

const ghValue = "Bearer ghp_REALVALUE_0123456789"

// The secret's header is set and its placeholder swapped, over HTTP/1.1
// and HTTP/2; another secret's placeholder is left alone; the real server
// sees the real value, the workspace's client never does.
func TestInterceptSetsTheSecret(t *testing.T) {
	r := newInterceptRig(t, "api.test", true)
	if _, err := r.v.Set(SetRequest{Name: "GH", Hosts: []string{"api.test"}, Header: "Authorization: " + ghValue}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.v.Set(SetRequest{Name: "OTHER", Hosts: []string{"other.test"}, Header: "X-Key: other-real-value"}); err != nil {
		t.Fatal(err)
	}
	gh, other := NewPlaceholder(), NewPlaceholder()
	if r.v.Wants("ws1") {
		t.Fatal("a workspace without grants is wanted")
	}
	r.v.Grant("ws1", []Grant{{Name: "GH", Placeholder: gh}, {Name: "OTHER", Placeholder: other}})
	if !r.v.Wants("ws1") || r.v.Wants("ws2") {
		t.Fatal("Wants does not follow the grants")
	}
	for _, h2 := range []bool{false, true} {
		c := r.client(h2)
		code, body := r.get(c, "https://api.test/x", map[string]string{
			"Authorization": "token " + gh, // replaced by the secret's header
			"X-Echo":        "a " + gh + " b",
			"X-Other":       other,
		})
		proto := map[bool]string{false: "HTTP/1.1", true: "HTTP/2.0"}[h2]
		if code != 200 || body != proto+" api.test" {
			t.Fatalf("%s: exp 200 %q, got %d %q", proto, proto+" api.test", code, body)
		}
		got := r.seen.last(t)
		if got.Header.Get("Authorization") != ghValue || got.Header.Get("X-Echo") != "a "+ghValue+" b" {
			t.Fatalf("%s: the server did not get the secret: %v", proto, got.Header)
		}
		if got.Header.Get("X-Other") != other || got.Header.Get("X-Key") != "" {
			t.Fatalf("%s: a secret for another host was sent: %v", proto, got.Header)
		}
	}
	// A request without any header gets it too; a changed value is used
	// at once; a deleted secret is sent no more.
	c := r.client(false)
	if _, err := r.v.Set(SetRequest{Name: "GH", Hosts: []string{"api.test"}, Header: "Authorization: Bearer new-value-42"}); err != nil {
		t.Fatal(err)
	}
	r.get(c, "https://api.test/", nil)
	if got := r.seen.last(t).Header.Get("Authorization"); got != "Bearer new-value-42" {
		t.Fatalf("exp the new value, got %q", got)
	}
	if err := r.v.Delete("GH"); err != nil {
		t.Fatal(err)
	}
	r.get(c, "https://api.test/", map[string]string{"X-Echo": gh})
	if got := r.seen.last(t); got.Header.Get("Authorization") != "" || got.Header.Get("X-Echo") != gh {
		t.Fatalf("a deleted secret was still sent: %v", got.Header)
	}
}

// A request on the connection for another Host than its TLS server name
// is refused (the server was verified for that name only).
func TestInterceptRefusesAnotherHost(t *testing.T) {
	r := newInterceptRig(t, "api.test", true)
	if _, err := r.v.Set(SetRequest{Name: "GH", Hosts: []string{"api.test"}, Header: "Authorization: " + ghValue}); err != nil {
		t.Fatal(err)
	}
	r.v.Grant("ws1", []Grant{{Name: "GH", Placeholder: NewPlaceholder()}})
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(r.v.CACert())
	for _, h2 := range []string{"http/1.1", "h2"} {
		c, err := tls.Dial("tcp", r.addr, &tls.Config{ServerName: "api.test", RootCAs: pool, NextProtos: []string{h2}})
		if err != nil {
			t.Fatal(err)
		}
		tr := &http.Transport{DialTLSContext: func(context.Context, string, string) (net.Conn, error) { return c, nil }, ForceAttemptHTTP2: h2 == "h2"}
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("https://other.test/")
		if err != nil {
			t.Fatalf("%s: %v", h2, err)
		}
		resp.Body.Close()
		tr.CloseIdleConnections()
		if resp.StatusCode != http.StatusMisdirectedRequest {
			t.Fatalf("%s: exp 421 for another host, got %d", h2, resp.StatusCode)
		}
	}
	if n := r.seen.count(); n != 0 {
		t.Fatalf("the server saw %d requests for another host", n)
	}
}

// A server whose certificate does not verify never gets a request, let
// alone the secret: the workspace gets a 502.
func TestInterceptVerifiesTheServer(t *testing.T) {
	r := newInterceptRig(t, "api.test", false) // the lab CA is not trusted
	if _, err := r.v.Set(SetRequest{Name: "GH", Hosts: []string{"api.test"}, Header: "Authorization: " + ghValue}); err != nil {
		t.Fatal(err)
	}
	r.v.Grant("ws1", []Grant{{Name: "GH", Placeholder: NewPlaceholder()}})
	code, body := r.get(r.client(false), "https://api.test/", nil)
	if code != http.StatusBadGateway || !strings.Contains(body, "not verified as api.test") {
		t.Fatalf("exp 502 naming the failed verification, got %d %q", code, body)
	}
	if strings.Contains(body, "REALVALUE") {
		t.Fatal("the answer holds the secret")
	}
	if n := r.seen.count(); n != 0 {
		t.Fatalf("an unverified server saw %d requests", n)
	}
}

// A host no secret of the workspace is for is declined at once, nothing
// read: the proxy tunnels it untouched.
func TestInterceptDeclinesOtherHosts(t *testing.T) {
	r := newInterceptRig(t, "other.test", true)
	if _, err := r.v.Set(SetRequest{Name: "GH", Hosts: []string{"api.test"}, Header: "Authorization: " + ghValue}); err != nil {
		t.Fatal(err)
	}
	r.v.Grant("ws1", []Grant{{Name: "GH", Placeholder: NewPlaceholder()}})
	c, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	select {
	case sc := <-r.declined:
		b := make([]byte, 5)
		_ = sc.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(sc, b); err != nil || string(b) != "hello" {
			t.Fatalf("the declined connection lost bytes: %q %v", b, err)
		}
		sc.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("a connection to a host without a secret was not declined")
	}
}

// The CA's certificate is what workspaces get; its key is not in it.
func TestCACertHoldsNoKey(t *testing.T) {
	v := openTestVault(t, t.TempDir())
	rest := v.CACert()
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			t.Fatalf("the CA given to workspaces holds a %s", b.Type)
		}
	}
}

// A workspace has at most MaxConns connections intercepted at once (each
// holds buffers in the sidecar): one more is closed, and a slot that
// frees is taken again.
func TestInterceptBoundsConnections(t *testing.T) {
	r := newInterceptRig(t, "api.test", true)
	r.v.cfg.MaxConns = 2
	if _, err := r.v.Set(SetRequest{Name: "GH", Hosts: []string{"api.test"}, Header: "Authorization: " + ghValue}); err != nil {
		t.Fatal(err)
	}
	r.v.Grant("ws1", []Grant{{Name: "GH", Placeholder: NewPlaceholder()}})
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(r.v.CACert())
	dial := func() (*tls.Conn, error) {
		d := &net.Dialer{Timeout: 5 * time.Second}
		return tls.DialWithDialer(d, "tcp", r.addr, &tls.Config{ServerName: "api.test", RootCAs: pool})
	}
	var open []*tls.Conn
	for i := 0; i < 2; i++ {
		c, err := dial()
		if err != nil {
			t.Fatalf("connection %d: %v", i+1, err)
		}
		open = append(open, c)
	}
	if c, err := dial(); err == nil {
		c.Close()
		t.Fatal("a connection past the bound was served")
	}
	open[0].Close()
	// The slot is freed once the first connection's server side sees it
	// closed.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := dial()
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a freed slot was not taken again: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	open[1].Close()
}

// An upgrade (a WebSocket) goes through, with the secret set on its
// request, and then carries its own protocol both ways.
func TestInterceptUpgrade(t *testing.T) {
	r := newInterceptRig(t, "api.test", true)
	if _, err := r.v.Set(SetRequest{Name: "GH", Hosts: []string{"api.test"}, Header: "Authorization: " + ghValue}); err != nil {
		t.Fatal(err)
	}
	r.v.Grant("ws1", []Grant{{Name: "GH", Placeholder: NewPlaceholder()}})
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(r.v.CACert())
	c, err := tls.Dial("tcp", r.addr, &tls.Config{ServerName: "api.test", RootCAs: pool, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprint(c, "GET /ws HTTP/1.1\r\nHost: api.test\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("exp 101, got %v %v", resp, err)
	}
	if got := r.seen.last(t).Header.Get("Authorization"); got != ghValue {
		t.Fatalf("the upgrade's request lacks the secret: %q", got)
	}
	fmt.Fprint(c, "ping through")
	b := make([]byte, len("ping through"))
	if _, err := io.ReadFull(br, b); err != nil || string(b) != "ping through" {
		t.Fatalf("exp the echo after the upgrade, got %q %v", b, err)
	}
}

// BenchmarkIntercept is a GET on a kept-alive connection through the
// interception (TLS terminated, the secret set, TLS again to the server)
// against the same GET straight to the server, on the loopback.
func BenchmarkIntercept(b *testing.B) {
	r := newInterceptRig(b, "api.test", true)
	if _, err := r.v.Set(SetRequest{Name: "GH", Hosts: []string{"api.test"}, Header: "Authorization: " + ghValue}); err != nil {
		b.Fatal(err)
	}
	r.v.Grant("ws1", []Grant{{Name: "GH", Placeholder: NewPlaceholder()}})
	direct := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", r.server.Listener.Addr().String())
		},
		TLSClientConfig:   &tls.Config{RootCAs: r.labRoots},
		ForceAttemptHTTP2: true,
	}
	b.Cleanup(direct.CloseIdleConnections)
	for _, c := range []struct {
		name string
		hc   *http.Client
	}{{"direct", &http.Client{Transport: direct}}, {"intercepted", r.client(true)}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				resp, err := c.hc.Get("https://api.test/")
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}

// A workspace's POST reaches the server whole and its streamed answer
// comes back whole; a workspace that declares a longer body than it sends
// and then stops gets an error, not a hung interceptor, and the next
// request works.
func TestInterceptPostBodies(t *testing.T) {
	r := newInterceptRig(t, "api.test", true)
	if _, err := r.v.Set(SetRequest{Name: "GH", Hosts: []string{"api.test"}, Header: "Authorization: " + ghValue}); err != nil {
		t.Fatal(err)
	}
	r.v.Grant("ws1", []Grant{{Name: "GH", Placeholder: NewPlaceholder()}})
	c := r.client(false)
	for i := 0; i < 20; i++ {
		resp, err := c.Post("https://api.test/upload", "application/octet-stream", strings.NewReader(strings.Repeat("x", 1000+i)))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(b) != fmt.Sprintf("read %d bytes", 1000+i) {
			t.Fatalf("POST %d: %q, %v", i, b, err)
		}
	}

	// The lie: Content-Length 100, 10 bytes, then the write side closed.
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(r.v.CACert())
	raw, err := tls.Dial("tcp", r.addr, &tls.Config{RootCAs: pool, ServerName: "api.test", NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_ = raw.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(raw, "POST /upload HTTP/1.1\r\nHost: api.test\r\nContent-Length: 100\r\n\r\n0123456789"); err != nil {
		t.Fatal(err)
	}
	_ = raw.CloseWrite()
	start := time.Now()
	got, _ := io.ReadAll(raw)
	if time.Since(start) > 20*time.Second {
		t.Fatalf("a short body held the connection %s", time.Since(start))
	}
	if strings.Contains(string(got), "read 10 bytes") || strings.Contains(string(got), "read 100 bytes") {
		t.Fatalf("a body shorter than its length was passed on as whole: %q", got)
	}
	if code, body := r.get(c, "https://api.test/after", nil); code != http.StatusOK || !strings.Contains(body, "api.test") {
		t.Fatalf("the request after: %d %q", code, body)
	}
}
