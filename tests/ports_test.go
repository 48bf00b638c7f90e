package tests

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/patina-dev/patina/sidecar/client"
)

// startTestServer runs the test HTTP server inside a workspace, in the
// background, on addr, and waits until a forward of port succeeds.
func startTestServer(t *testing.T, h *Harness, ws, addr string, port int) client.PortForward {
	t.Helper()
	h.Out(ws, "default", fmt.Sprintf("nohup /.patina/bin/patina agent test-server --listen %s >/tmp/test-server.log 2>&1 &", addr))
	var p client.PortForward
	WaitFor(t, "the test server to listen", 20*time.Second, func() bool {
		var err error
		p, err = h.Client.ForwardPort(context.Background(), ws, client.ForwardPortRequest{Port: port})
		return err == nil
	})
	return p
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return string(b)
}

// TestPortForward: a server in a workspace reached on the host's loopback
// through the sidecar, for HTTP (plain, large, streamed, echoed binary), a
// protocol upgrade (raw bytes both ways after 101) and many connections at
// once; the forward survives a kill -9 of the sidecar at the same address;
// bad requests get clear errors.
func TestPortForward(t *testing.T) {
	h := Start(t)
	ctx := context.Background()
	ws := h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "web"})

	// Nothing listens yet: a clear 409, at once.
	start := time.Now()
	_, err := h.Client.ForwardPort(ctx, "web", client.ForwardPortRequest{Port: 3000})
	if !IsCode(err, client.CodeNotListening) || !strings.Contains(err.Error(), "3000") {
		t.Fatalf("exp not_listening for a port nobody listens on, got %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("a port nobody listens on took %s to refuse", d)
	}

	p := startTestServer(t, h, "web", "0.0.0.0:3000", 3000)
	if !strings.HasPrefix(p.Address, "127.0.0.1:") || p.URL != "http://"+p.Address+"/" || p.Port != 3000 {
		t.Fatalf("exp a loopback address, got %+v", p)
	}
	again, err := h.Client.ForwardPort(ctx, "web", client.ForwardPortRequest{Port: 3000})
	if err != nil || again.Address != p.Address {
		t.Fatalf("forwarding again: exp the same address %s, got %+v %v", p.Address, again, err)
	}
	if code, body := h.Raw("POST", "/v1/workspaces/web/ports", "", []byte(`{"port":3000}`), nil); code != 200 {
		t.Fatalf("POST of a forwarded port: exp 200, got %d %s", code, body)
	}
	base := "http://" + p.Address

	t.Run("http", func(t *testing.T) {
		if got := httpGet(t, base+"/hello"); !strings.HasPrefix(got, "hello from ") {
			t.Fatalf("got %q", got)
		}
		const n = 64 << 20
		if got := httpGet(t, fmt.Sprintf("%s/bytes?n=%d", base, n)); len(got) != n {
			t.Fatalf("exp %d bytes, got %d", n, len(got))
		}
		body := make([]byte, 3<<20)
		rand.Read(body)
		resp, err := http.Post(base+"/echo", "application/octet-stream", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !bytes.Equal(got, body) {
			t.Fatalf("echo: exp the %d random bytes back, got %d bytes", len(body), len(got))
		}
	})

	t.Run("streaming", func(t *testing.T) {
		// 4 lines 1 s apart: the first must arrive long before the last
		// is written (nothing buffers the response whole).
		resp, err := http.Get(base + "/stream?n=4&ms=1000")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		t0 := time.Now()
		br := bufio.NewReader(resp.Body)
		line, err := br.ReadString('\n')
		if err != nil || line != "line 0\n" {
			t.Fatalf("first line: %q %v", line, err)
		}
		first := time.Since(t0)
		rest, _ := io.ReadAll(br)
		if string(rest) != "line 1\nline 2\nline 3\n" {
			t.Fatalf("rest: %q", rest)
		}
		if all := time.Since(t0); first > all/2 {
			t.Fatalf("the first line came after %s of %s: the stream was buffered", first, all)
		}
	})

	t.Run("upgrade", func(t *testing.T) {
		c, err := net.DialTimeout("tcp", p.Address, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		fmt.Fprintf(c, "GET /upgrade HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		br := bufio.NewReader(c)
		status, _ := br.ReadString('\n')
		if !strings.Contains(status, "101") {
			t.Fatalf("exp 101, got %q", status)
		}
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if l == "\r\n" {
				break
			}
		}
		msg := []byte{0, 1, 2, 0xff, 0xfe, '\n', 'x'}
		for i := 0; i < 3; i++ {
			c.Write(msg)
			got := make([]byte, len(msg))
			if _, err := io.ReadFull(br, got); err != nil || !bytes.Equal(got, msg) {
				t.Fatalf("round %d: exp %v echoed, got %v %v", i, msg, got, err)
			}
		}
	})

	t.Run("concurrent", func(t *testing.T) {
		const n = 100
		errs := make(chan error, n)
		for i := 0; i < n; i++ {
			go func() {
				resp, err := http.Post(base+"/echo", "text/plain", strings.NewReader(fmt.Sprint("conn ", i)))
				if err != nil {
					errs <- err
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(b) != fmt.Sprint("conn ", i) {
					errs <- fmt.Errorf("connection %d got %q", i, b)
					return
				}
				errs <- nil
			}()
		}
		for i := 0; i < n; i++ {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("list", func(t *testing.T) {
		ports, err := h.Client.Ports(ctx, "web")
		if err != nil || len(ports) != 1 || ports[0].Port != 3000 || ports[0].Address != p.Address {
			t.Fatalf("exp one forward of 3000 at %s, got %+v %v", p.Address, ports, err)
		}
		w, err := h.Client.GetWorkspace(ctx, "web")
		if err != nil || len(w.Ports) != 1 || w.Ports[0].Address != p.Address {
			t.Fatalf("exp the workspace to list its forward, got %+v %v", w.Ports, err)
		}
	})

	t.Run("survives a sidecar restart", func(t *testing.T) {
		h.Kill9()
		h.Launch()
		WaitFor(t, "the forward to answer again", 30*time.Second, func() bool {
			c := &http.Client{Timeout: 5 * time.Second}
			resp, err := c.Get(base + "/hello")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == 200
		})
		ports, err := h.Client.Ports(ctx, "web")
		if err != nil || len(ports) != 1 || ports[0].Address != p.Address {
			t.Fatalf("exp the same address %s after the restart, got %+v %v", p.Address, ports, err)
		}
	})

	t.Run("bad requests", func(t *testing.T) {
		for _, tc := range []struct {
			method, path, body string
			code               int
		}{
			{"POST", "/v1/workspaces/web/ports", `{"port":0}`, 400},
			{"POST", "/v1/workspaces/web/ports", `{"port":70000}`, 400},
			{"POST", "/v1/workspaces/web/ports", `{"port":3000,"host_port":-1}`, 400},
			{"POST", "/v1/workspaces/web/ports", `{"port":"x"}`, 400},
			{"POST", "/v1/workspaces/web/ports", `{"port":3000,"extra":1}`, 400},
			{"POST", "/v1/workspaces/web/ports", `not json`, 400},
			{"POST", "/v1/workspaces/nope/ports", `{"port":3000}`, 404},
			{"DELETE", "/v1/workspaces/web/ports/abc", ``, 400},
			{"DELETE", "/v1/workspaces/web/ports/4000", ``, 404},
			{"GET", "/v1/workspaces/nope/ports", ``, 404},
		} {
			if code, body := h.Raw(tc.method, tc.path, "", []byte(tc.body), nil); code != tc.code {
				t.Errorf("%s %s %s: exp %d, got %d %s", tc.method, tc.path, tc.body, tc.code, code, body)
			}
		}
	})

	t.Run("close", func(t *testing.T) {
		if err := h.Client.ClosePort(ctx, "web", 3000); err != nil {
			t.Fatal(err)
		}
		if c, err := net.DialTimeout("tcp", p.Address, 2*time.Second); err == nil {
			c.Close()
			t.Fatalf("the host port %s still accepts after close", p.Address)
		}
		if ports, _ := h.Client.Ports(ctx, "web"); len(ports) != 0 {
			t.Fatalf("exp no forwards, got %+v", ports)
		}
	})

	t.Run("stopped workspace", func(t *testing.T) {
		p := startTestServer(t, h, "web", "127.0.0.1:3001", 3001)
		if _, err := h.Client.StopWorkspace(ctx, "web"); err != nil {
			t.Fatal(err)
		}
		if _, err := h.Client.ForwardPort(ctx, "web", client.ForwardPortRequest{Port: 3002}); !IsCode(err, client.CodeStopped) {
			t.Fatalf("forwarding on a stopped workspace: exp stopped, got %v", err)
		}
		// A connection to the kept forward is closed, not left hanging.
		c, err := net.DialTimeout("tcp", p.Address, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(20 * time.Second))
		fmt.Fprintf(c, "GET /hello HTTP/1.0\r\n\r\n")
		if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil || isTimeout(err) {
			t.Fatalf("exp the connection closed, got %d %v", n, err)
		}
		c.Close()
	})
	if err := h.Client.DeleteWorkspace(ctx, ws.ID, client.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestPortForwardNoNetwork: with network "none", a server on the
// container's loopback is still reached (the tunnel is the agent's
// channel, not the container's network), and each workspace's forward
// reaches its own server, not another's on the same port.
func TestPortForwardNoNetwork(t *testing.T) {
	h := Start(t)
	a := h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "island", Network: &client.NetworkPolicy{Mode: client.NetworkNone}})
	b := h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "other"})
	pa := startTestServer(t, h, "island", "127.0.0.1:8080", 8080)
	pb := startTestServer(t, h, "other", "127.0.0.1:8080", 8080)
	ha := strings.TrimSpace(h.Out("island", "default", "hostname"))
	hb := strings.TrimSpace(h.Out("other", "default", "hostname"))
	if ha == hb {
		t.Fatalf("two workspaces share the hostname %q", ha)
	}
	if got := httpGet(t, "http://"+pa.Address+"/hello"); got != "hello from "+ha+"\n" {
		t.Fatalf("island's forward: exp its own server (%s), got %q", ha, got)
	}
	if got := httpGet(t, "http://"+pb.Address+"/hello"); got != "hello from "+hb+"\n" {
		t.Fatalf("other's forward: exp its own server (%s), got %q", hb, got)
	}
	_ = a
	_ = b
}

// TestPortForwardHostile: a workspace server that floods a client that
// does not read costs the sidecar bounded memory (each tunnel's window),
// and the sidecar keeps answering, for this workspace and others.
func TestPortForwardHostile(t *testing.T) {
	h := Start(t)
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "flood"})
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "calm"})
	p := startTestServer(t, h, "flood", "127.0.0.1:9000", 9000)
	before := h.RSS()
	var conns []net.Conn
	for i := 0; i < 20; i++ {
		c, err := net.Dial("tcp", p.Address)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "GET /bytes?n=%d HTTP/1.0\r\n\r\n", int64(4)<<30)
	}
	time.Sleep(3 * time.Second) // the server writes as fast as it can; nobody reads
	if got := h.Out("calm", "default", "echo ok"); got != "ok\n" {
		t.Fatalf("another workspace: %q", got)
	}
	if got := h.Out("flood", "default", "echo ok"); got != "ok\n" {
		t.Fatalf("the flooding workspace's own exec: %q", got)
	}
	after := h.RSS()
	for _, c := range conns {
		c.Close()
	}
	// 20 tunnels × (a 256 KiB window + socket buffers) is a few MB; 80 GB
	// were offered.
	if grew := after - before; grew > 64<<20 {
		t.Fatalf("the sidecar grew by %d MB under 20 unread 4 GB responses", grew>>20)
	}
	t.Logf("sidecar RSS %d MB before, %d MB with 20 unread floods", before>>20, after>>20)
}
