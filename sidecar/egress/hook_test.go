package egress

import (
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
)

// passHook takes over the TLS connections for one server name and carries
// them itself (as a credential proxy would, minus the TLS): what the test
// checks is what the proxy lets it do.
type passHook struct {
	name  string
	mu    sync.Mutex
	names []string // every server name offered
}

func (h *passHook) Wants(string) bool { return true }

func (h *passHook) HandleTLS(ctx context.Context, _ string, serverName string, client net.Conn, dial func(context.Context) (net.Conn, error)) bool {
	h.mu.Lock()
	h.names = append(h.names, serverName)
	h.mu.Unlock()
	if serverName != h.name {
		return false
	}
	defer client.Close()
	up, err := dial(ctx)
	if err != nil {
		return true
	}
	defer up.Close()
	go func() { _, _ = io.Copy(up, client) }()
	_, _ = io.Copy(client, up)
	return true
}

func (h *passHook) offered() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.names...)
}

// The hook is offered only what the policy allows, reaches the upstream
// only through the dial it is given, and its upstream connections are cut
// when the policy stops allowing them; other names are tunnelled as they
// are.
func TestProxyTLSHook(t *testing.T) {
	hook := &passHook{name: "a.wild.test"}
	n := newTestNetWith(t, func(c *Config) { c.TLS = hook })
	_, tlsPort, _ := servers(t)
	slow := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for r.Context().Err() == nil {
			if _, err := w.Write(make([]byte, 1024)); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			time.Sleep(10 * time.Millisecond)
		}
	}))
	t.Cleanup(slow.Close)
	slowPort := netip.MustParseAddrPort(strings.TrimPrefix(slow.URL, "https://")).Port()
	nowhere := func(p uint16) string { return netip.AddrPortFrom(netip.MustParseAddr("198.51.100.1"), p).String() }

	n.set("allow", "*.wild.test", "allowed.test")
	if body, err := tlsGet(t, n.dial("127.0.0.1", nowhere(tlsPort)), "a.wild.test"); err != nil || body != "hello a.wild.test" {
		t.Fatalf("through the hook: exp hello, got %q %v", body, err)
	}
	if body, err := tlsGet(t, n.dial("127.0.0.1", nowhere(tlsPort)), "allowed.test"); err != nil || body != "hello allowed.test" {
		t.Fatalf("a name the hook declines: exp it tunnelled, got %q %v", body, err)
	}
	if _, err := tlsGet(t, n.dial("127.0.0.1", nowhere(tlsPort)), "other.test"); err == nil {
		t.Fatal("a name the policy refuses went through")
	}
	n.event("other.test")
	for _, name := range hook.offered() {
		if name == "other.test" {
			t.Fatal("the hook was offered a connection the policy refuses")
		}
	}

	// A long response through the hook, then a policy without its name:
	// the hook's upstream connection is cut.
	c := n.dial("127.0.0.1", nowhere(slowPort))
	tc := tlsClient(c, "a.wild.test")
	fmt.Fprintf(tc, "GET /slow HTTP/1.1\r\nHost: a.wild.test\r\n\r\n")
	_ = tc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(tc, make([]byte, 4096)); err != nil {
		t.Fatalf("the long response through the hook did not start: %v", err)
	}
	n.set("allow", "allowed.test")
	_ = tc.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := io.Copy(io.Discard, tc)
	if err != nil && strings.Contains(err.Error(), "timeout") {
		t.Fatal("a connection through the hook outlived the policy that allowed it")
	}
}

// tlsClient starts TLS over c with server name sni (any certificate).
func tlsClient(c net.Conn, sni string) *tls.Conn {
	tc := tls.Client(c, &tls.Config{ServerName: sni, InsecureSkipVerify: true})
	_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
	_ = tc.Handshake()
	_ = tc.SetDeadline(time.Time{})
	return tc
}
