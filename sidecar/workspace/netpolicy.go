package workspace

import "github.com/patina-dev/patina/sidecar/egress"

// Network modes of a workspace (egress's, which holds workspaces to them).
const (
	// NetworkNone: no network at all.
	NetworkNone = egress.ModeNone
	// NetworkOpen: the internet, never the host, private, link-local or
	// other reserved addresses, never another workspace.
	NetworkOpen = egress.ModeOpen
	// NetworkAllow: only the destinations listed in Allow.
	NetworkAllow = egress.ModeAllow
)

// NetworkPolicy is a workspace's network: a mode and, for NetworkAllow,
// what it lets through.
type NetworkPolicy struct {
	// Mode is NetworkNone, NetworkOpen or NetworkAllow (in a request, ""
	// and "bridge" mean open).
	Mode string
	// Allow lists what mode "allow" lets through: DNS names (a leading
	// "*." matches every name below), IP addresses and CIDR prefixes, each
	// with an optional ":port" ("[2001:db8::1]:443" for IPv6).
	Allow []string
}

// policyInfo is a parsed policy as Info shows it.
func policyInfo(p egress.Policy) NetworkPolicy {
	return NetworkPolicy{Mode: p.Mode, Allow: p.AllowList()}
}
