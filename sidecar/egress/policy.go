package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Modes of a policy (the API's network modes, which a test of the
// sidecar keeps equal to these).
const (
	// ModeNone: no network at all.
	ModeNone = "none"
	// ModeOpen: the internet, never the host, private, link-local or
	// other reserved addresses, never another workspace.
	ModeOpen = "open"
	// ModeAllow: only the destinations of the allow list.
	ModeAllow = "allow"
)

// ErrInvalid: a policy that cannot be parsed.
var ErrInvalid = errors.New("invalid network policy")

// ErrWidens: a change asked to only narrow a policy would allow more.
var ErrWidens = errors.New("the change would allow more than the current policy")

// Limits of an allow list.
const (
	maxRules   = 256
	maxRuleLen = 260
)

// Policy is a workspace's network policy, parsed.
type Policy struct {
	Mode  string // ModeNone, ModeOpen or ModeAllow
	Allow []Rule
}

// Rule is one entry of an allow list: a DNS name (Name, maybe "*.x.y") or
// an address prefix (Prefix), and a port (0: any).
type Rule struct {
	Text   string
	Name   string
	Prefix netip.Prefix
	Port   uint16
}

// Parse checks a policy, a mode and its allow list, and normalises it
// (mode "bridge" or "" is "open"; names lower case; prefixes masked).
func Parse(mode string, allow []string) (Policy, error) {
	out := Policy{Mode: mode}
	switch mode {
	case "", "bridge":
		out.Mode = ModeOpen
	case ModeNone, ModeOpen, ModeAllow:
	default:
		return Policy{}, fmt.Errorf("%w: mode must be none, open or allow, got %q", ErrInvalid, mode)
	}
	if out.Mode != ModeAllow {
		if len(allow) > 0 {
			return Policy{}, fmt.Errorf("%w: an allow list needs mode \"allow\"", ErrInvalid)
		}
		return out, nil
	}
	if len(allow) > maxRules {
		return Policy{}, fmt.Errorf("%w: at most %d allow entries", ErrInvalid, maxRules)
	}
	seen := map[string]bool{}
	for _, s := range allow {
		r, err := ParseRule(s)
		if err != nil {
			return Policy{}, err
		}
		if !seen[r.Text] {
			seen[r.Text] = true
			out.Allow = append(out.Allow, r)
		}
	}
	return out, nil
}

// AllowList is the allow list as text, each entry as Parse normalised it
// (nil for a policy that is not an allow list, or an empty one).
func (p Policy) AllowList() []string {
	var out []string
	for _, r := range p.Allow {
		out = append(out, r.Text)
	}
	return out
}

// String is the policy as people read it: "open", "none", or
// "allow pypi.org, 10.0.0.5:5432" ("allow (nothing)" for an empty list).
func (p Policy) String() string {
	if p.Mode != ModeAllow {
		return p.Mode
	}
	if len(p.Allow) == 0 {
		return "allow (nothing)"
	}
	return "allow " + strings.Join(p.AllowList(), ", ")
}

// ParseRule parses one allow entry: "pypi.org", "*.golang.org",
// "example.com:8443", "10.0.0.5", "10.0.0.5:5432", "203.0.113.0/24",
// "203.0.113.0/24:443", "2001:db8::1", "[2001:db8::1]:443",
// "2001:db8::/32", "[2001:db8::/32]:443".
func ParseRule(s string) (Rule, error) {
	bad := func(why string) (Rule, error) {
		return Rule{}, fmt.Errorf("%w: allow entry %q: %s", ErrInvalid, s, why)
	}
	if len(s) == 0 || len(s) > maxRuleLen {
		return bad(fmt.Sprintf("must be 1 to %d bytes", maxRuleLen))
	}
	host, port := s, ""
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.Index(s, "]")
		if end < 0 {
			return bad("a [ without ]")
		}
		host = s[1:end]
		rest := s[end+1:]
		if rest != "" {
			p, ok := strings.CutPrefix(rest, ":")
			if !ok {
				return bad("want [address]:port")
			}
			port = p
		}
		if !strings.Contains(host, ":") {
			return bad("brackets are for IPv6 addresses")
		}
	case strings.Count(s, ":") == 1:
		host, port, _ = strings.Cut(s, ":")
	}
	var r Rule
	if port != "" {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 || strconv.FormatUint(n, 10) != port {
			return bad("the port must be a number from 1 to 65535")
		}
		r.Port = uint16(n)
	}
	if pfx, err := netip.ParsePrefix(host); err == nil {
		if pfx.Addr().Zone() != "" {
			return bad("no zones")
		}
		a := pfx.Addr()
		bits := pfx.Bits()
		if a.Is4In6() && bits >= 96 {
			a, bits = a.Unmap(), bits-96
		}
		r.Prefix = netip.PrefixFrom(a, bits).Masked()
	} else if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return bad("no zones")
		}
		a = a.Unmap()
		r.Prefix = netip.PrefixFrom(a, a.BitLen())
	} else if strings.ContainsAny(host, ":/[]") {
		return bad("not an address, a prefix or a name")
	} else {
		name, err := normalName(host, true)
		if err != nil {
			return bad(err.Error())
		}
		r.Name = name
	}
	r.Text = r.String()
	return r, nil
}

// String is the rule's canonical text.
func (r Rule) String() string {
	var host string
	if r.Name != "" {
		host = r.Name
	} else if r.Prefix.Bits() == r.Prefix.Addr().BitLen() {
		host = r.Prefix.Addr().String()
	} else {
		host = r.Prefix.String()
	}
	if r.Port == 0 {
		return host
	}
	if r.Name == "" && r.Prefix.Addr().Is6() {
		host = "[" + host + "]"
	}
	return host + ":" + strconv.Itoa(int(r.Port))
}

// normalName lower-cases a DNS name and checks it: labels of letters,
// digits, '-' and '_', 1 to 63 bytes, at most 253 in all, no trailing dot
// (one is removed); with wildcard, a first label "*" (then at least two
// more labels).
func normalName(s string, wildcard bool) (string, error) {
	s = strings.ToLower(strings.TrimSuffix(s, "."))
	if s == "" || len(s) > 253 {
		return "", errors.New("a name must be 1 to 253 bytes")
	}
	if _, err := netip.ParseAddr(s); err == nil {
		return "", errors.New("an address, not a name")
	}
	labels := strings.Split(s, ".")
	for i, l := range labels {
		if l == "*" && i == 0 && wildcard {
			if len(labels) < 3 {
				return "", errors.New("a wildcard needs a domain of at least two labels under it (\"*.example.com\"); use mode open for everything")
			}
			continue
		}
		if len(l) == 0 || len(l) > 63 {
			return "", errors.New("each label of a name must be 1 to 63 bytes")
		}
		for j := 0; j < len(l); j++ {
			c := l[j]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("a name may hold letters, digits, '-', '_' and '.' (and a leading \"*.\"), not %q", c)
			}
		}
	}
	return s, nil
}

// matchName reports whether the rule's name covers name ("*.x.y" covers
// every name ending in ".x.y", not "x.y" itself).
func (r Rule) matchName(name string) bool {
	if r.Name == "" {
		return false
	}
	if suffix, ok := strings.CutPrefix(r.Name, "*"); ok {
		return len(name) > len(suffix) && strings.HasSuffix(name, suffix)
	}
	return r.Name == name
}

func (r Rule) matchPort(port uint16) bool { return r.Port == 0 || r.Port == port }

// MatchName returns the rule that lets name (lower case, no trailing dot)
// through on port (0: any port of some rule).
func (p Policy) MatchName(name string, port uint16) (Rule, bool) {
	if p.Mode != ModeAllow {
		return Rule{}, false
	}
	for _, r := range p.Allow {
		if r.matchName(name) && (port == 0 || r.matchPort(port)) {
			return r, true
		}
	}
	return Rule{}, false
}

// MatchAddr returns the address rule that lets addr:port through (port 0:
// any port of some rule).
func (p Policy) MatchAddr(addr netip.Addr, port uint16) (Rule, bool) {
	if p.Mode != ModeAllow {
		return Rule{}, false
	}
	addr = addr.Unmap()
	for _, r := range p.Allow {
		if r.Name == "" && r.Prefix.Contains(addr) && (port == 0 || r.matchPort(port)) {
			return r, true
		}
	}
	return Rule{}, false
}

// Narrows returns nil when p allows nothing that old does not (an agent
// may ask for that itself), else ErrWidens saying what is wider.
func (p Policy) Narrows(old Policy) error {
	widens := func(what string) error {
		return fmt.Errorf("%w: %s (the current policy: %s)", ErrWidens, what, old)
	}
	switch {
	case p.Mode == ModeNone:
		return nil
	case old.Mode == ModeNone:
		return widens("any network")
	case p.Mode == ModeOpen:
		if old.Mode == ModeOpen {
			return nil
		}
		return widens("mode open")
	}
	// p is an allow list.
	for _, r := range p.Allow {
		if old.Mode == ModeOpen {
			// Names resolve only to addresses open allows; an address rule
			// must not open a forbidden range.
			if r.Name == "" && prefixForbidden(r.Prefix) {
				return widens(r.Text + " (a range mode open forbids)")
			}
			continue
		}
		if !old.covers(r) {
			return widens(r.Text)
		}
	}
	return nil
}

// covers reports whether some rule of p allows everything r does.
func (p Policy) covers(r Rule) bool {
	for _, o := range p.Allow {
		if o.Port != 0 && o.Port != r.Port {
			continue
		}
		switch {
		case r.Name != "" && o.Name != "":
			if o.Name == r.Name {
				return true
			}
			if suffix, ok := strings.CutPrefix(o.Name, "*"); ok {
				// "*.a.b" covers "x.a.b" and "*.x.a.b".
				n := strings.TrimPrefix(r.Name, "*")
				if len(n) > len(suffix) && strings.HasSuffix(n, suffix) {
					return true
				}
			}
		case r.Name == "" && o.Name == "":
			if o.Prefix.Addr().Is4() == r.Prefix.Addr().Is4() && o.Prefix.Bits() <= r.Prefix.Bits() && o.Prefix.Contains(r.Prefix.Addr()) {
				return true
			}
		}
	}
	return false
}
