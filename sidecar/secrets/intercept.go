package secrets

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"time"

	"github.com/patina-dev/patina/internal/proxybody"
)

// Bounds of an intercepted connection. Unlike the proxy's tunnels, which
// the kernel splices, an intercepted connection holds buffers in the
// sidecar: each is bounded, and so is their number per workspace
// (Config.MaxConns), so that a workspace that opens many and reads
// nothing costs the sidecar a few tens of MB at most.
const (
	readHeaderTimeout = 30 * time.Second
	idleTimeout       = 2 * time.Minute
	// upstreamIdle is how long an idle connection to a real server is
	// kept for the next request (net/http's default).
	upstreamIdle = 90 * time.Second
	// expectContinueWait is how long a request with "Expect: 100-continue"
	// waits for the upstream's go-ahead before its body is sent anyway.
	expectContinueWait = time.Second
	maxHeaderBytes     = 64 << 10
	// HTTP/2 from the workspace: streams at once, and what it may send
	// ahead of the server's reading.
	maxStreams         = 16
	clientConnWindow   = 256 << 10
	clientStreamWindow = 64 << 10
	// HTTP/2 to the server: what it may send ahead of the workspace's
	// reading.
	serverConnWindow   = 1 << 20
	serverStreamWindow = 256 << 10
	copyBuffer         = 32 << 10
)

// buffers are the copy buffers of every intercepted connection.
var buffers = &bufferPool{p: sync.Pool{New: func() any { return make([]byte, copyBuffer) }}}

type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte  { return b.p.Get().([]byte) }
func (b *bufferPool) Put(p []byte) { b.p.Put(p) }

// Wants reports whether workspace id holds any secret: its TLS
// connections are then offered to HandleTLS.
func (v *Vault) Wants(id string) bool {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return len(v.grants[id]) > 0
}

// HandleTLS takes over a TLS connection to serverName when workspace id
// holds a secret for it (else it returns false at once, having read
// nothing): it terminates TLS with a certificate of the sidecar's CA and
// forwards each request to the real server, reached through dial and
// verified, with the secrets' headers set and their placeholders swapped.
func (v *Vault) HandleTLS(ctx context.Context, id, serverName string, client net.Conn, dial func(context.Context) (net.Conn, error)) bool {
	if len(v.matching(id, serverName)) == 0 {
		return false
	}
	defer client.Close()
	log := v.log.With("workspace_id", id, "host", serverName)
	if !v.take(id) {
		log.Warn("refused a connection to a secret's host: too many at once", "max", v.cfg.MaxConns)
		return true
	}
	defer v.release(id)
	cert, err := v.ca.leaf(serverName, v.cfg.Now())
	if err != nil {
		log.Warn("make a certificate", "err", err)
		return true
	}
	tc := tls.Server(client, &tls.Config{
		Certificates: []tls.Certificate{*cert},
		NextProtos:   []string{"h2", "http/1.1"},
		MinVersion:   tls.VersionTLS12,
	})
	hctx, cancel := context.WithTimeout(ctx, v.cfg.HandshakeTimeout)
	err = tc.HandshakeContext(hctx)
	cancel()
	if err != nil {
		log.Debug("TLS handshake with the workspace", "err", err)
		return true
	}
	stop := context.AfterFunc(ctx, func() { tc.Close() })
	defer stop()

	up := newUpstream(serverName, dial, v.cfg.Roots, v.cfg.HandshakeTimeout)
	defer up.close()
	errLog := slog.NewLogLogger(log.Handler(), slog.LevelDebug)
	h := &intercepted{v: v, id: id, host: serverName, log: log}
	h.proxy = &httputil.ReverseProxy{
		Rewrite:    h.rewrite,
		Transport:  up,
		BufferPool: buffers,
		ErrorLog:   errLog,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the workspace's client went away
			}
			log.Debug("forward a request", "err", err)
			http.Error(w, fmt.Sprintf("patina: %s: %v", serverName, err), http.StatusBadGateway)
		},
	}
	l := &oneConn{c: tc, done: make(chan struct{})}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          errLog,
		HTTP2: &http.HTTP2Config{MaxConcurrentStreams: maxStreams, MaxReceiveBufferPerConnection: clientConnWindow,
			MaxReceiveBufferPerStream: clientStreamWindow},
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateClosed || s == http.StateHijacked {
				l.finish()
			}
		},
	}
	_ = srv.Serve(l)
	// A hijacked connection (a WebSocket) is still being served.
	h.active.wait()
	return true
}

// intercepted serves the requests of one intercepted connection.
type intercepted struct {
	v      *Vault
	id     string
	host   string
	log    *slog.Logger
	proxy  *httputil.ReverseProxy
	active handlers
}

// handlers counts the requests being served, so that a connection is let
// go only once they are over.
type handlers struct {
	mu     sync.Mutex
	n      int
	closed bool
	idle   chan struct{}
}

func (a *handlers) enter() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return false
	}
	a.n++
	return true
}

func (a *handlers) leave() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n--; a.n == 0 && a.idle != nil {
		close(a.idle)
		a.idle = nil
	}
}

// wait refuses new requests and waits for the ones being served.
func (a *handlers) wait() {
	a.mu.Lock()
	a.closed = true
	if a.n == 0 {
		a.mu.Unlock()
		return
	}
	a.idle = make(chan struct{})
	idle := a.idle
	a.mu.Unlock()
	<-idle
}

func (h *intercepted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.active.enter() {
		http.Error(w, "patina: the connection is closing", http.StatusServiceUnavailable)
		return
	}
	defer h.active.leave()
	if host := requestHost(r.Host); host != h.host {
		// The server was chosen, and verified, by the TLS server name: a
		// request for another host is not sent to it.
		h.log.Debug("refused a request for another host", "request_host", host)
		http.Error(w, fmt.Sprintf("patina: this connection is to %s (its TLS server name); a request for %q is refused", h.host, host), http.StatusMisdirectedRequest)
		return
	}
	if r.Method == http.MethodConnect {
		http.Error(w, "patina: CONNECT is refused", http.StatusMethodNotAllowed)
		return
	}
	h.proxy.ServeHTTP(w, r)
}

// rewrite aims the request at the real server and sets the secrets: each
// placeholder of a secret for this host is swapped for its value in every
// header, then each secret's header is set (whatever the workspace sent).
// Placeholders of other secrets are left as they are.
func (h *intercepted) rewrite(pr *httputil.ProxyRequest) {
	pr.Out.URL.Scheme = "https"
	pr.Out.URL.Host = pr.In.Host
	pr.Out.Host = pr.In.Host
	proxybody.Limit(pr.Out)
	ms := h.v.matching(h.id, h.host)
	for _, vals := range pr.Out.Header {
		for i, val := range vals {
			for _, m := range ms {
				if strings.Contains(val, m.placeholder) {
					val = strings.ReplaceAll(val, m.placeholder, m.Value)
				}
			}
			vals[i] = val
		}
	}
	names := make([]string, 0, len(ms))
	for _, m := range ms {
		pr.Out.Header.Set(m.Header, m.Value)
		names = append(names, m.Name)
	}
	h.log.Debug("secrets set on a request", "secrets", names, "method", pr.In.Method)
}

// requestHost is a request's Host without its port, lower case.
func requestHost(h string) string {
	if hp, _, err := net.SplitHostPort(h); err == nil {
		h = hp
	}
	return strings.ToLower(strings.TrimSuffix(strings.Trim(h, "[]"), "."))
}

// upstream reaches the real server: only through dial (which the egress
// proxy gives, to an address the policy allows), verifying that the
// server is serverName by its certificate before anything is sent.
type upstream struct {
	h2, h1 *http.Transport
}

func newUpstream(serverName string, dial func(context.Context) (net.Conn, error), roots *x509.CertPool, timeout time.Duration) *upstream {
	mk := func(protos []string) *http.Transport {
		return &http.Transport{
			DialTLSContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				raw, err := dial(ctx)
				if err != nil {
					return nil, err
				}
				tc := tls.Client(raw, &tls.Config{ServerName: serverName, RootCAs: roots, NextProtos: protos, MinVersion: tls.VersionTLS12})
				hctx, cancel := context.WithTimeout(ctx, timeout)
				defer cancel()
				if err := tc.HandshakeContext(hctx); err != nil {
					raw.Close()
					return nil, fmt.Errorf("the server is not verified as %s: %w", serverName, err)
				}
				return tc, nil
			},
			ForceAttemptHTTP2:      len(protos) > 1,
			HTTP2:                  &http.HTTP2Config{MaxReceiveBufferPerConnection: serverConnWindow, MaxReceiveBufferPerStream: serverStreamWindow},
			MaxIdleConnsPerHost:    4,
			IdleConnTimeout:        upstreamIdle,
			TLSHandshakeTimeout:    timeout,
			ExpectContinueTimeout:  expectContinueWait,
			MaxResponseHeaderBytes: maxHeaderBytes,
		}
	}
	return &upstream{h2: mk([]string{"h2", "http/1.1"}), h1: mk([]string{"http/1.1"})}
}

// RoundTrip sends an upgrade (a WebSocket) over HTTP/1.1, anything else
// over what the server offers.
func (u *upstream) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get("Upgrade") != "" {
		return u.h1.RoundTrip(r)
	}
	return u.h2.RoundTrip(r)
}

func (u *upstream) close() {
	u.h2.CloseIdleConnections()
	u.h1.CloseIdleConnections()
}

// oneConn is a listener of one connection, for an http.Server to serve
// it: Accept returns it once, then waits until it is finished.
type oneConn struct {
	mu   sync.Mutex
	c    net.Conn
	done chan struct{}
	once sync.Once
}

func (l *oneConn) Accept() (net.Conn, error) {
	l.mu.Lock()
	c := l.c
	l.c = nil
	l.mu.Unlock()
	if c != nil {
		return c, nil
	}
	<-l.done
	return nil, net.ErrClosed
}

func (l *oneConn) finish() { l.once.Do(func() { close(l.done) }) }

func (l *oneConn) Close() error {
	l.finish()
	return nil
}

func (l *oneConn) Addr() net.Addr { return dummyAddr{} }

type dummyAddr struct{}

func (dummyAddr) Network() string { return "tcp" }
func (dummyAddr) String() string  { return "intercepted" }
