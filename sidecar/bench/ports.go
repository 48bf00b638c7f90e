package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	pclient "github.com/patina-dev/patina/sidecar/client"
)

// benchPort is where the test server listens inside the workspace.
const benchPort = 3000

// Ports compares a forwarded port with the container's own address: the
// same HTTP requests to the test server in the workspace, through the
// sidecar's forward (host loopback → sidecar → agent → server) and
// directly to the container's IP on the engine's network.
type Ports struct {
	// Forwarded and Direct time GET /hello on one keep-alive connection.
	Forwarded Latency `json:"forwarded"`
	Direct    Latency `json:"direct"`
	// AddedP50MS is Forwarded.P50MS − Direct.P50MS.
	AddedP50MS float64 `json:"added_p50_ms"`
	// ForwardedBytes and DirectBytes: one GET of PortBytes zero bytes.
	ForwardedBytes Transfer `json:"forwarded_bytes"`
	DirectBytes    Transfer `json:"direct_bytes"`
	// ThroughputRatio is ForwardedBytes.MBPerSecond ÷ DirectBytes.MBPerSecond.
	ThroughputRatio float64 `json:"throughput_ratio"`
}

// ports starts the test server in ws, forwards its port and measures both
// paths, alternating rounds so that a change of load hits both.
func (r *runner) ports(ctx context.Context, ws, containerID string) (Ports, error) {
	if err := r.out(ctx, ws, fmt.Sprintf("nohup /.patina/bin/patina agent test-server --listen 0.0.0.0:%d >/tmp/bench-server.log 2>&1 &", benchPort)); err != nil {
		return Ports{}, fmt.Errorf("start the test server: %w", err)
	}
	var fwd pclient.PortForward
	var err error
	deadline := time.Now().Add(20 * time.Second)
	for {
		fwd, err = r.c.ForwardPort(ctx, ws, pclient.ForwardPortRequest{Port: benchPort})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return Ports{}, fmt.Errorf("forward the test server's port: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	ip, err := r.containerIP(ctx, containerID)
	if err != nil {
		return Ports{}, err
	}
	direct := net.JoinHostPort(ip, strconv.Itoa(benchPort))
	hc := func() *http.Client {
		return &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}}
	}
	fc, dc := hc(), hc()
	defer fc.CloseIdleConnections()
	defer dc.CloseIdleConnections()
	get := func(c *http.Client, addr, path string) (int64, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
		if err != nil {
			return 0, err
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		n, err := io.Copy(io.Discard, resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("%s%s: %s", addr, path, resp.Status)
		}
		return n, err
	}
	for i := 0; i < 20; i++ { // warm both connections
		if _, err := get(fc, fwd.Address, "/hello"); err != nil {
			return Ports{}, fmt.Errorf("through the forward: %w", err)
		}
		if _, err := get(dc, direct, "/hello"); err != nil {
			return Ports{}, fmt.Errorf("to the container's address %s: %w", direct, err)
		}
	}
	var fl, dl []time.Duration
	for i := 0; i < r.o.PortSamples; i++ {
		t0 := time.Now()
		if _, err := get(fc, fwd.Address, "/hello"); err != nil {
			return Ports{}, err
		}
		fl = append(fl, time.Since(t0))
		t0 = time.Now()
		if _, err := get(dc, direct, "/hello"); err != nil {
			return Ports{}, err
		}
		dl = append(dl, time.Since(t0))
	}
	var p Ports
	p.Forwarded, p.Direct = summarise(fl), summarise(dl)
	p.AddedP50MS = p.Forwarded.P50MS - p.Direct.P50MS
	path := fmt.Sprintf("/bytes?n=%d", r.o.PortBytes)
	for _, x := range []struct {
		c    *http.Client
		addr string
		out  *Transfer
	}{{dc, direct, &p.DirectBytes}, {fc, fwd.Address, &p.ForwardedBytes}} {
		t0 := time.Now()
		n, err := get(x.c, x.addr, path)
		if err != nil || n != r.o.PortBytes {
			return Ports{}, fmt.Errorf("GET %s from %s: %d bytes of %d: %v", path, x.addr, n, r.o.PortBytes, err)
		}
		*x.out = transfer(n, time.Since(t0))
	}
	if p.DirectBytes.MBPerSecond > 0 {
		p.ThroughputRatio = p.ForwardedBytes.MBPerSecond / p.DirectBytes.MBPerSecond
	}
	return p, nil
}

// containerIP is the workspace container's address on its network, as the
// engine reports it.
func (r *runner) containerIP(ctx context.Context, containerID string) (string, error) {
	info, err := r.api.ContainerInspect(ctx, containerID)
	if err != nil {
		return "", fmt.Errorf("inspect the workspace's container: %w", err)
	}
	if info.NetworkSettings != nil {
		for _, n := range info.NetworkSettings.Networks {
			if n != nil && n.IPAddress != "" {
				return n.IPAddress, nil
			}
		}
	}
	return "", fmt.Errorf("the workspace's container %.12s has no IP address", containerID)
}
