package egress

import "net/netip"

// class says how an address may be reached.
type class int

const (
	// reachable: mode open reaches it; an allowed name may resolve to it.
	reachable class = iota
	// guarded: private, link-local (cloud metadata), CGNAT, unique-local
	// and other ranges that are not the internet: refused unless an
	// explicit address rule of an allow list names it.
	guarded
	// never: loopback, unspecified, multicast, reserved: refused whatever
	// the policy says. (The host's own addresses and the workspaces'
	// network are refused the same way, by the proxy, which knows them.)
	never
)

type rangeInfo struct {
	prefix netip.Prefix
	class  class
	why    string
}

func mustRange(s string, c class, why string) rangeInfo {
	return rangeInfo{netip.MustParsePrefix(s), c, why}
}

// ranges are the address ranges that are not the internet. The
// documentation ranges (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24,
// 2001:db8::/32, 3fff::/20) are deliberately absent: they stand for the
// internet in tests and examples.
var ranges = []rangeInfo{
	mustRange("0.0.0.0/8", never, "\"this network\""),
	mustRange("127.0.0.0/8", never, "loopback"),
	mustRange("224.0.0.0/4", never, "multicast"),
	mustRange("240.0.0.0/4", never, "reserved"),
	mustRange("10.0.0.0/8", guarded, "private"),
	mustRange("172.16.0.0/12", guarded, "private"),
	mustRange("192.168.0.0/16", guarded, "private"),
	mustRange("100.64.0.0/10", guarded, "shared address space (CGNAT)"),
	mustRange("169.254.0.0/16", guarded, "link-local (cloud metadata)"),
	mustRange("192.0.0.0/24", guarded, "IETF protocol assignments"),
	mustRange("192.88.99.0/24", guarded, "6to4 relay anycast"),
	mustRange("198.18.0.0/15", guarded, "benchmarking"),
	mustRange("168.63.129.16/32", guarded, "cloud platform endpoint (Azure)"),
	mustRange("::/128", never, "unspecified"),
	mustRange("::1/128", never, "loopback"),
	mustRange("ff00::/8", never, "multicast"),
	mustRange("fe80::/10", guarded, "link-local"),
	mustRange("fec0::/10", guarded, "site-local"),
	mustRange("fc00::/7", guarded, "unique-local (cloud metadata)"),
	mustRange("100::/64", guarded, "discard-only"),
	mustRange("64:ff9b:1::/48", guarded, "local-use NAT64"),
	mustRange("2001::/23", guarded, "IETF protocol assignments (Teredo, benchmarking, ORCHID)"),
	mustRange("::/96", guarded, "IPv4-compatible"),
	// (The IPv4 address inside ::ffff:0:0/96, 64:ff9b::/96 and 2002::/16
	// is classified instead: see classify.)
}

// embedded returns the IPv4 address an IPv6 address carries (v4-mapped,
// NAT64 well-known prefix, 6to4).
func embedded(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() {
		return netip.Addr{}, false
	}
	b := a.As16()
	switch {
	case a.Is4In6():
		return a.Unmap(), true
	case b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && allZero(b[4:12]): // 64:ff9b::/96
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), true
	case b[0] == 0x20 && b[1] == 0x02: // 2002::/16
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), true
	}
	return netip.Addr{}, false
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// classify says how a can be reached and, when it is not the internet,
// why.
func classify(a netip.Addr) (class, string) {
	a = a.WithZone("")
	if v4, ok := embedded(a); ok {
		c, why := classify(v4)
		if c != reachable {
			return c, why + " (" + v4.String() + " inside " + a.String() + ")"
		}
		if a.Is4In6() {
			return reachable, ""
		}
	}
	for _, r := range ranges {
		if r.prefix.Contains(a) {
			return r.class, r.why
		}
	}
	if a.Is4() && a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return never, "broadcast"
	}
	return reachable, ""
}

// prefixForbidden reports whether any address of p is not the internet
// (for Narrows: an address rule must not open what mode open forbids).
func prefixForbidden(p netip.Prefix) bool {
	for _, r := range ranges {
		if r.prefix.Overlaps(p) {
			return true
		}
	}
	for _, s := range []string{"::ffff:0:0/96", "64:ff9b::/96", "2002::/16"} {
		if netip.MustParsePrefix(s).Overlaps(p) {
			return true
		}
	}
	return false
}
