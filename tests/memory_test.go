package tests

// The sidecar's memory under a hostile workspace's load: many large
// answers at once, many tunnels nobody reads. Whatever the number, the
// sidecar's resident memory stays bounded (its memory budget).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/patina-dev/patina/sidecar/client"
)

// maxSidecarRSS is the most resident memory the sidecar may reach under
// the loads below (issue 23: ≤ 100 MB whatever the load).
const maxSidecarRSS = 100 << 20

// peakRSS is the sidecar process's peak resident memory (VmHWM) in bytes.
func (h *Harness) peakRSS() int64 {
	h.t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", h.pid()))
	if err != nil {
		h.t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(rest), "%d", &kb)
			return kb << 10
		}
	}
	h.t.Fatal("no VmHWM")
	return 0
}

// startWithWorkspaces starts a sidecar (skipped with -short: it needs
// Docker) with a new workspace for each of names.
func startWithWorkspaces(t *testing.T, names ...string) *Harness {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Docker")
	}
	h := Start(t)
	for _, name := range names {
		h.CreateWorkspace(client.CreateWorkspaceRequest{Name: name})
	}
	return h
}

// TestHostileConcurrentOutputs: 40 commands at once in one workspace, each
// writing 4 MB of random bytes (invalid UTF-8: text and base64 in the
// answer) to stdout and 4 MB to stderr. Every answer comes back whole
// (head and tail of each stream), and the sidecar's peak RSS stays under
// maxSidecarRSS.
func TestHostileConcurrentOutputs(t *testing.T) {
	h := startWithWorkspaces(t, "loud", "bystander")
	const n, size = 40, 4_000_000
	// Every session exists before the load, so the load is the answers.
	for i := range n {
		h.CreateSession("loud", client.CreateSessionRequest{ID: fmt.Sprintf("s%d", i)})
	}
	base := h.RSS()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := fmt.Sprintf("head -c %d /dev/urandom; head -c %d /dev/urandom >&2", size, size)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := h.Client.Exec(ctx, "loud", fmt.Sprintf("s%d", i), client.ExecRequest{Command: cmd})
			switch {
			case err != nil:
				errs <- err
			case res.StdoutBytes != size || res.StderrBytes != size || !res.StdoutTruncated || !res.StderrTruncated:
				errs <- fmt.Errorf("exec %d: sizes %d %d, truncated %v %v", i, res.StdoutBytes, res.StderrBytes, res.StdoutTruncated, res.StderrTruncated)
			case len(res.StdoutData()) != 1<<20 || len(res.StderrData()) != 1<<20 || res.StdoutTailB64 == "" || res.StderrTailB64 == "":
				errs <- fmt.Errorf("exec %d: heads of %d and %d bytes, tails %d and %d base64 chars", i, len(res.StdoutData()), len(res.StderrData()), len(res.StdoutTailB64), len(res.StderrTailB64))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	peak := h.peakRSS()
	t.Logf("sidecar RSS before the load %d MB, peak %d MB (bound %d MB)", base>>20, peak>>20, maxSidecarRSS>>20)
	if peak > maxSidecarRSS {
		t.Fatalf("40 concurrent answers of 2 × 4 MB took the sidecar to %d MB RSS (bound %d MB)", peak>>20, maxSidecarRSS>>20)
	}
	h.responsive("bystander")
}

// TestHostileUnreadForwards: a workspace's servers send 1 GB to each of
// 1,000 connections through its forwarded ports, and nobody reads them.
// The sidecar's peak RSS stays under maxSidecarRSS, and it keeps serving
// the workspace and others.
func TestHostileUnreadForwards(t *testing.T) {
	h := startWithWorkspaces(t, "flood", "bystander")
	const ports, perPort = 4, 250 // under the 256 connections one port takes
	var fwds []client.PortForward
	for i := range ports {
		port := 3000 + i
		fwds = append(fwds, startTestServer(t, h, "flood", fmt.Sprintf("127.0.0.1:%d", port), port))
	}
	base := h.RSS()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for _, f := range fwds {
		for range perPort {
			c, err := smallDialer.Dial("tcp", f.Address)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
			// Ask for 1 GB, then never read.
			if _, err := fmt.Fprintf(c, "GET /bytes?n=1000000000 HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Every connection is tunnelled (the forwards count them), and the
	// servers have had time to fill every window and buffer on the way.
	WaitFor(t, "1,000 tunnels", 2*time.Minute, func() bool {
		open := 0
		for _, p := range h.ports("flood") {
			open += p.Connections
		}
		return open == ports*perPort
	})
	// Then the servers push until every buffer on the way is full: the
	// kernel's socket buffers first, then the sidecar's stream windows.
	// That takes a minute or more (main grew by 2–5 MB/s to 273 MB): wait
	// until the sidecar's RSS has not grown for 10 s, at most 3 minutes.
	last, still := h.RSS(), 0
	for start := time.Now(); still < 10 && time.Since(start) < 3*time.Minute; {
		time.Sleep(time.Second)
		rss := h.RSS()
		if rss > last+1<<20 {
			last, still = rss, 0
		} else {
			still++
		}
		if s := time.Since(start).Round(time.Second); s%(10*time.Second) == 0 {
			t.Logf("after %s: sidecar RSS %d MB", s, rss>>20)
		}
	}
	peak := h.peakRSS()
	t.Logf("sidecar RSS before the load %d MB, peak %d MB (bound %d MB)", base>>20, peak>>20, maxSidecarRSS>>20)
	if peak > maxSidecarRSS {
		t.Fatalf("1,000 unread tunnels took the sidecar to %d MB RSS (bound %d MB)", peak>>20, maxSidecarRSS>>20)
	}
	h.responsive("bystander")
	if got := h.Out("flood", "default", "echo alive"); got != "alive\n" {
		t.Fatalf("the flooding workspace itself: %q", got)
	}
	// A connection that reads gets its bytes while the others stall.
	if got := httpGet(t, "http://"+fwds[0].Address+"/hello"); got == "" {
		t.Fatal("a reading connection got nothing")
	}
}

// smallDialer connects as a client across a real network would: segments
// of an Ethernet's 1460 bytes (not loopback's 64 KiB, which makes the
// kernel size each connection's send buffer in megabytes) and a 4 KiB
// receive buffer, both set before the handshake. A client that never reads
// then holds little in the kernel, on either end, and what a server sends
// piles up on the way: in the sidecar, if anything lets it.
var smallDialer = net.Dialer{Timeout: 10 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
	var e1, e2 error
	err := rc.Control(func(fd uintptr) {
		e1 = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		e2 = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_MAXSEG, 1460)
	})
	return errors.Join(err, e1, e2)
}}

// ports lists a workspace's forwards.
func (h *Harness) ports(ws string) []client.PortForward {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := h.Client.Ports(ctx, ws)
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}
