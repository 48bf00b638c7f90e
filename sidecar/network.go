package sidecar

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/patina-dev/patina/sidecar/container"
	"github.com/patina-dev/patina/sidecar/egress"
	"github.com/patina-dev/patina/sidecar/workspace"
)

// boundary is the sidecar's network boundary: its workspace network on
// the engine (container.Docker), the egress proxy and DNS server on that
// network's gateway, and the host firewall rules that send the network's
// traffic to them. It implements workspace.Network.
type boundary struct {
	log      *slog.Logger
	docker   *container.Docker // nil: a swarm
	remote   bool              // the engine is on another host: no boundary
	stateDir string
	upstream string
	refused  func(string, egress.Refusal)
	hook     egress.TLSHook // the secrets' (nil: none)

	mu   sync.Mutex
	why  string // "" once enforced
	svc  *egress.Service
	info container.NetInfo
}

// egressPorts is <state>/egress.json: the ports the proxy and DNS server
// took, taken again at the next start (the firewall rules name them).
type egressPorts struct {
	Proxy int `json:"proxy_port"`
	DNS   int `json:"dns_port"`
}

func newBoundary(cfg Config, eng engine, stateDir string, logger *slog.Logger) *boundary {
	b := &boundary{log: logger.With("component", "network"), stateDir: stateDir, upstream: cfg.DNS}
	d, ok := eng.(*container.Docker)
	b.docker = d // nil for a swarm
	switch {
	case !ok:
		b.why = "a swarm's workspaces run on other hosts, whose traffic this sidecar does not see"
	case !d.Local():
		b.why = "the Docker engine is on another host"
		b.remote = true
	default:
		b.why = "the sidecar has not started its network boundary yet"
	}
	return b
}

// start sets the boundary up: the network, the proxy, the rules. A failure
// leaves the sidecar without one (network none only), saying why.
func (b *boundary) start(ctx context.Context) {
	if b.docker == nil || b.remote {
		b.log.Info("workspaces can only have network none", "why", b.why)
		return
	}
	if err := b.setup(ctx); err != nil {
		b.mu.Lock()
		b.why = err.Error()
		b.mu.Unlock()
		b.log.Warn("no network boundary: workspaces can only have network none", "err", err)
	}
}

// networkSetupTimeout bounds making (or finding) the workspaces' network
// and reading it back, at the sidecar's start.
const networkSetupTimeout = time.Minute

func (b *boundary) setup(ctx context.Context) error {
	upstream := b.upstream
	if upstream == "" {
		var err error
		if upstream, err = systemResolver("/etc/resolv.conf"); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, networkSetupTimeout)
	defer cancel()
	info, err := b.docker.Network(ctx)
	if err != nil {
		return fmt.Errorf("the workspaces' network: %w", err)
	}
	var ports egressPorts
	portsFile := filepath.Join(b.stateDir, "egress.json")
	if data, err := os.ReadFile(portsFile); err == nil {
		_ = json.Unmarshal(data, &ports)
	}
	var svc *egress.Service
	for _, p := range []egressPorts{ports, {}} {
		svc, err = egress.New(egress.Config{
			Gateway: info.Gateway, ProxyPort: p.Proxy, DNSPort: p.DNS, Subnet: info.Subnet,
			Upstream: upstream, Refused: b.refused, TLS: b.hook, Logger: b.log,
		})
		if err != nil {
			return err
		}
		if err = svc.Start(); err == nil {
			break
		}
	}
	if err != nil {
		return err
	}
	ports = egressPorts{Proxy: svc.ProxyPort(), DNS: svc.DNSPort()}
	if data, err := json.Marshal(ports); err == nil {
		_ = os.WriteFile(portsFile, append(data, '\n'), 0o600)
	}
	if err := egress.InstallRules(ctx, egress.Rules{Iface: info.Iface, ProxyPort: ports.Proxy, DNSPort: ports.DNS}); err != nil {
		svc.Close()
		return err
	}
	b.mu.Lock()
	b.svc, b.info, b.why = svc, info, ""
	b.mu.Unlock()
	b.log.Info("network boundary up", "network", info.Name, "bridge", info.Iface, "subnet", info.Subnet, "gateway", info.Gateway, "dns_upstream", upstream)
	return nil
}

// systemResolver is the first name server of a resolv.conf.
func systemResolver(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("no DNS server to forward workspaces' queries to (give serve --dns HOST:PORT): %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "nameserver" {
			if a, err := netip.ParseAddr(fields[1]); err == nil {
				return net.JoinHostPort(a.String(), "53"), nil
			}
		}
	}
	return "", fmt.Errorf("no DNS server to forward workspaces' queries to: %s names none (give serve --dns HOST:PORT)", path)
}

func (b *boundary) Enforced() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.why
}

func (b *boundary) Apply(ctx context.Context, workspaceID, containerID string, p egress.Policy) error {
	b.mu.Lock()
	svc := b.svc
	b.mu.Unlock()
	if b.docker == nil {
		return nil // a swarm: its overlay was made for the policy
	}
	if svc == nil {
		if p.Mode != egress.ModeNone {
			return nil
		}
		// Only network none here: take a container of an older patina off
		// the network it was on.
		_, err := b.docker.Attach(ctx, containerID, false)
		return err
	}
	if p.Mode == egress.ModeNone {
		// Cut its connections while the resets can still reach it: a socket
		// whose interface is gone would wait for ever.
		svc.Forget(workspaceID)
		_, err := b.docker.Attach(ctx, containerID, false)
		return err
	}
	addr, err := b.docker.Attach(ctx, containerID, true)
	if err != nil {
		return err
	}
	if !addr.IsValid() {
		svc.Forget(workspaceID)
		return nil
	}
	svc.Set(workspaceID, addr, p)
	return nil
}

func (b *boundary) Forget(workspaceID string) {
	b.mu.Lock()
	svc := b.svc
	b.mu.Unlock()
	if svc != nil {
		svc.Forget(workspaceID)
	}
}

// close stops the proxy; with no workspace left, it also removes the
// network and its rules (with workspaces, both stay: the rules keep
// refusing their traffic while no sidecar runs).
func (b *boundary) close(ctx context.Context, empty bool) {
	b.mu.Lock()
	svc, info := b.svc, b.info
	b.svc = nil
	b.mu.Unlock()
	if svc == nil {
		return
	}
	svc.Close()
	if !empty {
		return
	}
	gone, err := b.docker.RemoveNetwork(ctx)
	if err != nil || !gone {
		return
	}
	if err := egress.RemoveRules(ctx, info.Iface); err != nil && !errors.Is(err, context.Canceled) {
		b.log.Warn("remove the network's firewall rules", "err", err)
	}
}

var _ workspace.Network = (*boundary)(nil)
