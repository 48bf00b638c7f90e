package container

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
)

// NetInfo describes the sidecar's workspace network.
type NetInfo struct {
	ID      string
	Name    string
	Iface   string // the bridge's interface on the engine's host
	Gateway netip.Addr
	Subnet  netip.Prefix
}

// workspaceSubnetBits is the size of the workspace network's subnet: a /22
// holds 1,021 workspaces (a /24 held 253, fewer than one host runs idle:
// `patina bench --density` found the limit), and the default pool, a /16,
// 64 sidecars' networks.
const workspaceSubnetBits = 22

// maxSubnetTries bounds the subnets of the pool tried when the first are
// taken (a large pool has thousands; each try is an engine call).
const maxSubnetTries = 256

// createNetwork creates the sidecar's bridge network: no traffic between
// its containers (enable_icc false), no masquerading (nothing leaves it
// but through the sidecar's proxy), its interface named (the firewall
// rules name it), its subnet from the pool.
func (d *Docker) createNetwork(ctx context.Context) error {
	opts := map[string]string{
		"com.docker.network.bridge.enable_icc":           "false",
		"com.docker.network.bridge.enable_ip_masquerade": "false",
	}
	if d.cfg.Bridge != "" {
		opts["com.docker.network.bridge.name"] = d.cfg.Bridge
	}
	labels := map[string]string{LabelManaged: "1", LabelStateDir: d.cfg.StateDir}
	// A pool smaller than a /22 is one subnet: the whole pool.
	subnets := candidateSubnets(d.cfg.SubnetPool, d.cfg.StateDir, max(workspaceSubnetBits, d.cfg.SubnetPool.Bits()))
	var last error
	for _, sub := range subnets[:min(len(subnets), maxSubnetTries)] {
		gw := sub.Addr().Next()
		_, err := d.api.NetworkCreate(ctx, d.cfg.Network, network.CreateOptions{
			Driver:  "bridge",
			Options: opts,
			Labels:  labels,
			IPAM:    &network.IPAM{Config: []network.IPAMConfig{{Subnet: sub.String(), Gateway: gw.String()}}},
		})
		switch {
		case err == nil, errdefs.IsConflict(err):
			return nil
		case errdefs.IsPermissionDenied(err), errdefs.IsInvalidArgument(err):
			last = err // the subnet is taken: the next one
			continue
		}
		return fmt.Errorf("create network %s: %w", d.cfg.Network, err)
	}
	return fmt.Errorf("create network %s: no free subnet in %s: %w", d.cfg.Network, d.cfg.SubnetPool, last)
}

// candidateSubnets lists pool's subnets of size bits, starting at one
// chosen by key.
func candidateSubnets(pool netip.Prefix, key string, bits int) []netip.Prefix {
	if !pool.Addr().Is4() || pool.Bits() > bits {
		return nil
	}
	n := 1 << (bits - pool.Bits())
	h := sha256.Sum256([]byte(key))
	start := int(binary.BigEndian.Uint32(h[:4]) % uint32(n))
	base := binary.BigEndian.Uint32(pool.Masked().Addr().AsSlice())
	out := make([]netip.Prefix, 0, n)
	for i := range n {
		v := base + uint32((start+i)%n)<<(32-bits)
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], v)
		out = append(out, netip.PrefixFrom(netip.AddrFrom4(b), bits))
	}
	return out
}

// Network makes sure the sidecar's workspace network exists and describes
// it.
func (d *Docker) Network(ctx context.Context) (NetInfo, error) {
	id, err := d.ensureNetwork(ctx)
	if err != nil {
		return NetInfo{}, err
	}
	n, err := d.api.NetworkInspect(ctx, id, network.InspectOptions{})
	if err != nil {
		return NetInfo{}, fmt.Errorf("inspect network %s: %w", d.cfg.Network, err)
	}
	info := NetInfo{ID: n.ID, Name: n.Name, Iface: n.Options["com.docker.network.bridge.name"]}
	if info.Iface == "" {
		info.Iface = "br-" + short(n.ID)
	}
	for _, c := range n.IPAM.Config {
		p, err := netip.ParsePrefix(c.Subnet)
		if err != nil || !p.Addr().Is4() {
			continue
		}
		info.Subnet = p.Masked()
		if gw, err := netip.ParseAddr(c.Gateway); err == nil {
			info.Gateway = gw
		} else {
			info.Gateway = info.Subnet.Addr().Next()
		}
		break
	}
	if !info.Subnet.IsValid() {
		return NetInfo{}, fmt.Errorf("network %s has no IPv4 subnet", d.cfg.Network)
	}
	return info, nil
}

// Attach puts a container on the sidecar's network (on) or takes it off
// (off: no network at all), taking it off any other network (the shared
// network of older patinas, "none"), and returns its address there. It
// works on running containers: a workspace's network changes live.
func (d *Docker) Attach(ctx context.Context, containerID string, on bool) (netip.Addr, error) {
	netID := ""
	if on {
		var err error
		if netID, err = d.ensureNetwork(ctx); err != nil {
			return netip.Addr{}, err
		}
	}
	info, err := d.api.ContainerInspect(ctx, containerID)
	if errdefs.IsNotFound(err) {
		return netip.Addr{}, fmt.Errorf("container %s: %w", short(containerID), ErrNotFound)
	}
	if err != nil {
		return netip.Addr{}, err
	}
	attached := false
	if info.NetworkSettings != nil {
		for name, ep := range info.NetworkSettings.Networks {
			if ep != nil && on && ep.NetworkID == netID {
				attached = true
				continue
			}
			if !on && name == "none" {
				continue
			}
			if err := d.api.NetworkDisconnect(ctx, name, containerID, true); err != nil && !errdefs.IsNotFound(err) {
				return netip.Addr{}, fmt.Errorf("take workspace container %s off network %s: %w", short(containerID), name, err)
			}
		}
	}
	if !on {
		return netip.Addr{}, nil
	}
	if !attached {
		if err := d.api.NetworkConnect(ctx, netID, containerID, nil); err != nil {
			return netip.Addr{}, fmt.Errorf("put workspace container %s on network %s: %w", short(containerID), d.cfg.Network, err)
		}
	}
	return d.Address(ctx, containerID)
}

// Address is a container's address on the sidecar's network, from the
// engine (never from the container); invalid when it has none (stopped).
func (d *Docker) Address(ctx context.Context, containerID string) (netip.Addr, error) {
	id, err := d.findNetwork(ctx)
	if err != nil || id == "" {
		return netip.Addr{}, err
	}
	info, err := d.api.ContainerInspect(ctx, containerID)
	if errdefs.IsNotFound(err) {
		return netip.Addr{}, fmt.Errorf("container %s: %w", short(containerID), ErrNotFound)
	}
	if err != nil || info.NetworkSettings == nil {
		return netip.Addr{}, err
	}
	for _, ep := range info.NetworkSettings.Networks {
		if ep != nil && ep.NetworkID == id {
			a, err := netip.ParseAddr(ep.IPAddress)
			if err != nil {
				return netip.Addr{}, nil // attached, no address while stopped
			}
			return a, nil
		}
	}
	return netip.Addr{}, nil
}

// RemoveNetwork removes the sidecar's network when no container, running
// or not, is on it; it reports whether it is gone.
func (d *Docker) RemoveNetwork(ctx context.Context) (bool, error) {
	d.netMu.Lock()
	defer d.netMu.Unlock()
	list, err := networksNamed(ctx, d.api, d.cfg.Network)
	if err != nil {
		return false, err
	}
	gone := true
	for _, n := range list {
		if n.Labels[LabelManaged] != "1" {
			gone = false
			continue
		}
		if used, err := d.networkUsed(ctx, n.ID); err != nil || used {
			gone = false
			continue
		}
		if err := d.api.NetworkRemove(ctx, n.ID); err != nil && !errdefs.IsNotFound(err) {
			return false, err
		}
	}
	return gone, nil
}

// removeNetworks removes a state directory's networks (Cleanup).
func removeNetworks(ctx context.Context, api API, stateDir string) error {
	f := filters.NewArgs(filters.Arg("label", LabelManaged+"=1"), filters.Arg("label", LabelStateDir+"="+stateDir))
	list, err := api.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range list {
		if n.Driver != "bridge" {
			continue
		}
		if err := api.NetworkRemove(ctx, n.ID); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
