package egress

import "errors"

// Rules are the host firewall rules of one sidecar's workspace bridge:
// every TCP connection from it goes to the proxy, every DNS query (UDP
// and TCP port 53, whatever the server) to the DNS server, and everything
// else from it, or to the host, is refused. They stay in the kernel when
// the sidecar dies: connections then go to a port nothing listens on and
// are refused (a reset), so nothing opens while it is down.
type Rules struct {
	// Iface is the bridge's interface name (at most 15 bytes).
	Iface string
	// ProxyPort and DNSPort are where the sidecar listens on the gateway.
	ProxyPort, DNSPort int
}

// ErrFirewall: the rules could not be put in place (no iptables, not root,
// not in the host's network namespace).
var ErrFirewall = errors.New("cannot set the host firewall rules")

// chain names of an interface's rules (iptables allows 28 bytes).
func chains(iface string) (pre, in, fwd string) {
	return "PATINA-PRE-" + iface, "PATINA-IN-" + iface, "PATINA-FW-" + iface
}
