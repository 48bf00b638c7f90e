package egress

import (
	"errors"
	"net/netip"
	"testing"
)

func TestParseRule(t *testing.T) {
	for _, tc := range []struct{ in, exp string }{
		{"pypi.org", "pypi.org"},
		{"PyPI.org.", "pypi.org"},
		{"*.golang.org", "*.golang.org"},
		{"example.com:8443", "example.com:8443"},
		{"10.0.0.5", "10.0.0.5"},
		{"10.0.0.5:5432", "10.0.0.5:5432"},
		{"203.0.113.7/24", "203.0.113.0/24"},
		{"203.0.113.0/24:443", "203.0.113.0/24:443"},
		{"2001:db8::1", "2001:db8::1"},
		{"[2001:db8::1]:443", "[2001:db8::1]:443"},
		{"2001:db8::/32", "2001:db8::/32"},
		{"[2001:db8::/32]:443", "[2001:db8::/32]:443"},
		{"::ffff:10.0.0.5", "10.0.0.5"},
	} {
		r, err := ParseRule(tc.in)
		if err != nil || r.Text != tc.exp {
			t.Errorf("ParseRule(%q): exp %q, got %q %v", tc.in, tc.exp, r.Text, err)
		}
	}
	for _, in := range []string{"", "*", "*.com", "a..b", "-x:0", "x:65536", "x:08", "a b", "[10.0.0.1]:5",
		"[2001:db8::1]443", "fe80::1%eth0", "ex*ample.com", "a.*.b", "http://x", "x/y", "1.2.3.4:5:6"} {
		if _, err := ParseRule(in); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseRule(%q): exp ErrInvalid, got %v", in, err)
		}
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		mode  string
		allow []string
		exp   string
	}{
		{"none", nil, "none"}, {"", nil, "open"}, {"bridge", nil, "open"}, {"allow", nil, "allow (nothing)"},
		{"allow", []string{"PyPI.org", "10.0.0.5:5432", "pypi.org"}, "allow pypi.org, 10.0.0.5:5432"},
	} {
		p, err := Parse(tc.mode, tc.allow)
		if err != nil || p.String() != tc.exp {
			t.Errorf("Parse(%q, %q): exp %q, got %q %v", tc.mode, tc.allow, tc.exp, p, err)
		}
	}
	if _, err := Parse("open", []string{"a.test"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("an allow list with mode open: exp ErrInvalid, got %v", err)
	}
	if _, err := Parse("wide", nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("mode wide: exp ErrInvalid, got %v", err)
	}
}

func mustPolicy(t *testing.T, mode string, allow ...string) Policy {
	t.Helper()
	p, err := Parse(mode, allow)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestMatch(t *testing.T) {
	p := mustPolicy(t, "allow", "pypi.org", "*.golang.org", "api.test:8443", "10.0.0.5:5432", "203.0.113.0/24", "[2001:db8::/48]:443")
	for _, tc := range []struct {
		name string
		port uint16
		ok   bool
	}{
		{"pypi.org", 443, true}, {"files.pypi.org", 443, false}, {"proxy.golang.org", 443, true},
		{"a.b.golang.org", 80, true}, {"golang.org", 443, false}, {"evilgolang.org", 443, false},
		{"api.test", 8443, true}, {"api.test", 443, false},
	} {
		if _, ok := p.MatchName(tc.name, tc.port); ok != tc.ok {
			t.Errorf("MatchName(%s, %d): exp %v", tc.name, tc.port, tc.ok)
		}
	}
	for _, tc := range []struct {
		addr string
		port uint16
		ok   bool
	}{
		{"10.0.0.5", 5432, true}, {"10.0.0.5", 22, false}, {"10.0.0.6", 5432, false},
		{"203.0.113.77", 22, true}, {"::ffff:203.0.113.77", 22, true}, {"2001:db8::9", 443, true},
		{"2001:db8::9", 80, false}, {"2001:db8:1::9", 443, false},
	} {
		if _, ok := p.MatchAddr(netip.MustParseAddr(tc.addr), tc.port); ok != tc.ok {
			t.Errorf("MatchAddr(%s, %d): exp %v", tc.addr, tc.port, tc.ok)
		}
	}
	if _, ok := mustPolicy(t, "open").MatchName("pypi.org", 443); ok {
		t.Error("mode open matched a name rule")
	}
}

func TestNarrows(t *testing.T) {
	open := mustPolicy(t, "open")
	none := mustPolicy(t, "none")
	list := mustPolicy(t, "allow", "*.golang.org", "pypi.org:443", "10.0.0.0/8")
	for _, tc := range []struct {
		what     string
		old, new Policy
		ok       bool
	}{
		{"open to none", open, none, true},
		{"none to open", none, open, false},
		{"none to allow", none, mustPolicy(t, "allow", "a.test"), false},
		{"open to names", open, mustPolicy(t, "allow", "a.test", "203.0.113.0/24"), true},
		{"open to a private address", open, mustPolicy(t, "allow", "10.0.0.5"), false},
		{"open to metadata", open, mustPolicy(t, "allow", "169.254.169.254"), false},
		{"open to a v4-mapped private", open, mustPolicy(t, "allow", "::ffff:0:0/96"), false},
		{"list to open", list, open, false},
		{"list to a subset", list, mustPolicy(t, "allow", "proxy.golang.org", "*.x.golang.org:443", "pypi.org:443", "10.1.0.0/16:22"), true},
		{"list to the wildcard's own domain", list, mustPolicy(t, "allow", "golang.org"), false},
		{"list to another port", list, mustPolicy(t, "allow", "pypi.org:80"), false},
		{"list to any port", list, mustPolicy(t, "allow", "pypi.org"), false},
		{"list to a wider prefix", list, mustPolicy(t, "allow", "10.0.0.0/7"), false},
		{"list to empty", list, mustPolicy(t, "allow"), true},
	} {
		err := tc.new.Narrows(tc.old)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrWidens)) {
			t.Errorf("%s: exp ok=%v, got %v", tc.what, tc.ok, err)
		}
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		addr string
		exp  class
	}{
		{"203.0.113.10", reachable}, {"198.51.100.1", reachable}, {"192.0.2.1", reachable}, {"8.8.8.8", reachable},
		{"2001:db8::10", reachable}, {"2606:4700::1", reachable},
		{"10.1.2.3", guarded}, {"172.17.0.1", guarded}, {"192.168.1.1", guarded}, {"100.100.100.200", guarded},
		{"169.254.169.254", guarded}, {"169.254.170.2", guarded}, {"192.0.0.192", guarded}, {"168.63.129.16", guarded},
		{"fd00:ec2::254", guarded}, {"fe80::1", guarded}, {"fc00::1", guarded}, {"2001::1", guarded},
		{"127.0.0.1", never}, {"0.0.0.0", never}, {"255.255.255.255", never}, {"224.0.0.1", never},
		{"::1", never}, {"::", never}, {"ff02::1", never},
		{"::ffff:127.0.0.1", never}, {"::ffff:169.254.169.254", guarded}, {"::ffff:203.0.113.10", reachable},
		{"64:ff9b::a9fe:a9fe", guarded}, {"64:ff9b::7f00:1", never}, {"64:ff9b::cb00:710a", reachable},
		{"2002:a9fe:a9fe::1", guarded}, {"2002:7f00:1::", never}, {"::a9fe:a9fe", guarded},
	} {
		if got, why := classify(netip.MustParseAddr(tc.addr)); got != tc.exp {
			t.Errorf("classify(%s): exp %d, got %d (%s)", tc.addr, tc.exp, got, why)
		}
	}
}

func FuzzParseRule(f *testing.F) {
	for _, s := range []string{"pypi.org", "*.a.b:1", "[::1]:2", "10.0.0.0/8:3", "::ffff:1.2.3.4/120"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRule(s)
		if err != nil {
			return
		}
		again, err := ParseRule(r.Text)
		if err != nil || again.Text != r.Text {
			t.Fatalf("%q parsed to %q, which parses to %q %v", s, r.Text, again.Text, err)
		}
	})
}
