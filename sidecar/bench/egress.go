package bench

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"

	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"

	pclient "github.com/patina-dev/patina/sidecar/client"
)

// TargetEgressThroughputRatio: a download through the egress proxy keeps
// at least half the direct throughput.
const TargetEgressThroughputRatio = 0.5

// Egress compares the egress proxy with no proxy: the same HTTPS test
// server, on a Docker network of its own on a documentation range ("the
// internet" to a workspace's policy), reached from the workspace (through
// the sidecar's proxy) and from the host (directly).
type Egress struct {
	// Skipped says why it was not measured (the sidecar has no network
	// boundary: not root, say).
	Skipped string `json:"skipped,omitempty"`
	// ProxyGet and DirectGet time HTTPS GET /hello on one keep-alive
	// connection.
	ProxyGet   Latency `json:"proxy_get"`
	DirectGet  Latency `json:"direct_get"`
	AddedP50MS float64 `json:"added_p50_ms"`
	// ProxyBytes and DirectBytes: one HTTPS GET of PortBytes bytes.
	ProxyBytes  Transfer `json:"proxy_bytes"`
	DirectBytes Transfer `json:"direct_bytes"`
	// ThroughputRatio is ProxyBytes.MBPerSecond ÷ DirectBytes.MBPerSecond.
	ThroughputRatio float64 `json:"throughput_ratio"`
	// Rounds: each side ran this many times, alternating; the figures
	// are each side's median round (latency and throughput apart).
	Rounds int `json:"rounds"`
}

// egressRounds is how many times each side runs.
const egressRounds = 3

// medianRound is the median of rounds: its p50 latency and its
// throughput, each the median of theirs.
func medianRound(rs []ClientResult) ClientResult {
	byGet := slices.Clone(rs)
	slices.SortFunc(byGet, func(a, b ClientResult) int { return cmp.Compare(a.Get.P50MS, b.Get.P50MS) })
	byBytes := slices.Clone(rs)
	slices.SortFunc(byBytes, func(a, b ClientResult) int { return cmp.Compare(a.Bytes.MBPerSecond, b.Bytes.MBPerSecond) })
	return ClientResult{Get: byGet[len(rs)/2].Get, Bytes: byBytes[len(rs)/2].Bytes}
}

// egress runs the test server in a container of its own and measures both
// paths to it.
func (r *runner) egress(ctx context.Context, ws pclient.Workspace) (Egress, error) {
	if ws.Network.Mode != pclient.NetworkOpen {
		return Egress{Skipped: "the sidecar has no network boundary here (its log says why): workspaces have network " + ws.Network.Mode}, nil
	}
	addr, err := r.startInternet(ctx)
	if err != nil {
		return Egress{}, err
	}
	base := "https://" + addr.String()
	// The server takes a moment to listen.
	deadline := time.Now().Add(20 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := RunTestClient(cctx, base, 1, 1)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return Egress{}, fmt.Errorf("the test server at %s does not answer: %w", base, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Alternating rounds, the median of each side: the load of a shared
	// machine changes from one second to the next.
	var directs, proxies []ClientResult
	samples := max(1, r.o.PortSamples/egressRounds)
	for range egressRounds {
		d, err := RunTestClient(ctx, base, samples, r.o.PortBytes)
		if err != nil {
			return Egress{}, fmt.Errorf("directly: %w", err)
		}
		directs = append(directs, d)
		cmd := fmt.Sprintf("/.patina/bin/patina agent test-client --url %s --samples %d --bytes %d", base, samples, r.o.PortBytes)
		res, err := r.c.Exec(ctx, ws.ID, "default", pclient.ExecRequest{Command: cmd})
		if err != nil {
			return Egress{}, err
		}
		if res.ExitCode != 0 {
			return Egress{}, fmt.Errorf("through the proxy: %q exited %d: %s", cmd, res.ExitCode, res.Stderr)
		}
		var p ClientResult
		if err := json.Unmarshal([]byte(res.Stdout), &p); err != nil {
			return Egress{}, fmt.Errorf("through the proxy: %w: %q", err, res.Stdout)
		}
		proxies = append(proxies, p)
	}
	var e Egress
	e.Rounds = egressRounds
	direct, proxied := medianRound(directs), medianRound(proxies)
	e.ProxyGet, e.DirectGet = proxied.Get, direct.Get
	e.AddedP50MS = e.ProxyGet.P50MS - e.DirectGet.P50MS
	e.ProxyBytes, e.DirectBytes = proxied.Bytes, direct.Bytes
	if e.DirectBytes.MBPerSecond > 0 {
		e.ThroughputRatio = e.ProxyBytes.MBPerSecond / e.DirectBytes.MBPerSecond
	}
	return e, nil
}

// startInternet runs `patina agent test-server --tls` (the host's binary,
// mounted read-only) in a container on a new bridge network of a
// documentation range, and returns its address; cleanup removes both.
func (r *runner) startInternet(ctx context.Context) (netip.AddrPort, error) {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "patina-bench-internet-" + hex.EncodeToString(b)
	var sub netip.Prefix
	var err error
	for i := range 16 { // 198.51.100.0/24 in /28s, from a random one
		s := netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 51, 100, byte((int(b[0]) + i) % 16 * 16)}), 28)
		_, err = r.api.NetworkCreate(ctx, name, network.CreateOptions{
			Driver: "bridge",
			Labels: map[string]string{"dev.patina.bench": "1"},
			IPAM:   &network.IPAM{Config: []network.IPAMConfig{{Subnet: s.String(), Gateway: s.Addr().Next().String()}}},
		})
		if err == nil {
			sub = s
			break
		}
	}
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("create the test server's network: %w", err)
	}
	r.mu.Lock()
	r.extra = append(r.extra, func(ctx context.Context) error { return r.api.NetworkRemove(ctx, name) })
	r.mu.Unlock()
	ip := sub.Addr().Next().Next()
	resp, err := r.api.ContainerCreate(ctx, &container.Config{
		Image:      r.o.Image,
		Entrypoint: []string{"/patina-bench", "agent", "test-server", "--tls", "--listen", "0.0.0.0:8443"},
		Cmd:        []string{},
		Labels:     map[string]string{"dev.patina.bench": "1"},
	}, &container.HostConfig{
		NetworkMode: container.NetworkMode(name),
		Mounts:      []mount.Mount{{Type: mount.TypeBind, Source: r.o.Binary, Target: "/patina-bench", ReadOnly: true}},
		CapDrop:     []string{"ALL"},
	}, &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
		name: {IPAMConfig: &network.EndpointIPAMConfig{IPv4Address: ip.String()}},
	}}, nil, name)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("create the test server's container: %w", err)
	}
	r.mu.Lock()
	// Removed before its network (cleanup runs these last first).
	r.extra = append(r.extra, func(ctx context.Context) error {
		return r.api.ContainerRemove(ctx, resp.ID, container.RemoveOptions{Force: true})
	})
	r.mu.Unlock()
	if err := r.api.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		return netip.AddrPort{}, fmt.Errorf("start the test server's container: %w", err)
	}
	return netip.AddrPortFrom(ip, 8443), nil
}
