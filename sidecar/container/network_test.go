package container

import (
	"net/netip"
	"testing"
)

// A sidecar's network is a /22 of the pool, chosen by its state directory,
// with every other /22 of the pool as the next choices; a pool smaller
// than a /22 is the one subnet.
func TestCandidateSubnets(t *testing.T) {
	pool := netip.MustParsePrefix("10.213.0.0/16")
	subs := candidateSubnets(pool, "/var/lib/patina", max(workspaceSubnetBits, pool.Bits()))
	if len(subs) != 64 {
		t.Fatalf("exp the 64 /22s of a /16, got %d", len(subs))
	}
	seen := map[netip.Prefix]bool{}
	for _, s := range subs {
		if s.Bits() != 22 || !pool.Contains(s.Addr()) || s.Masked() != s || seen[s] {
			t.Fatalf("bad or repeated candidate %s in %v", s, subs)
		}
		seen[s] = true
	}
	if again := candidateSubnets(pool, "/var/lib/patina", 22); again[0] != subs[0] {
		t.Errorf("exp the same first choice for the same state directory, got %s and %s", subs[0], again[0])
	}
	small := netip.MustParsePrefix("192.168.7.0/24")
	if got := candidateSubnets(small, "x", max(workspaceSubnetBits, small.Bits())); len(got) != 1 || got[0] != small {
		t.Errorf("a /24 pool: exp itself, got %v", got)
	}
}
