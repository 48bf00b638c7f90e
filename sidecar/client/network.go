package client

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Network modes of a workspace.
const (
	// NetworkNone: no network at all.
	NetworkNone = "none"
	// NetworkOpen: the internet, never the host, private, link-local or
	// other reserved addresses, never another workspace.
	NetworkOpen = "open"
	// NetworkAllow: only the destinations listed in Allow.
	NetworkAllow = "allow"
)

// NetworkPolicy is a workspace's network: {"mode": "none"|"open"|"allow",
// "allow": ["pypi.org", "*.golang.org", "10.0.0.5:5432", "203.0.113.0/24"]}.
// In a request it may also be given as the string "none" or "open" ("bridge",
// the name before policies, means "open").
type NetworkPolicy struct {
	Mode string `json:"mode"`
	// Allow lists what mode "allow" lets through: DNS names (a leading
	// "*." matches every name below), IP addresses and CIDR prefixes, each
	// with an optional ":port" ("[2001:db8::1]:443" for IPv6).
	Allow []string `json:"allow,omitempty"`
}

// UnmarshalJSON takes the object form or the string forms.
func (p *NetworkPolicy) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		if s == "bridge" {
			s = NetworkOpen
		}
		*p = NetworkPolicy{Mode: s}
		return nil
	}
	// The object, with its keys spelled exactly (encoding/json would take
	// "MODE" for "mode") and no others.
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("network must be \"none\", \"open\" or an object {\"mode\", \"allow\"}: %w", err)
	}
	var out NetworkPolicy
	for k, v := range raw {
		var err error
		switch k {
		case "mode":
			err = json.Unmarshal(v, &out.Mode)
		case "allow":
			err = json.Unmarshal(v, &out.Allow)
		default:
			return fmt.Errorf("network: unknown field %q", k)
		}
		if err != nil {
			return fmt.Errorf("network.%s: %w", k, err)
		}
	}
	if out.Mode == "bridge" {
		out.Mode = NetworkOpen
	}
	*p = out
	return nil
}

// String is the policy as `ws show` prints it: "open", "none", or
// "allow pypi.org, 10.0.0.5:5432".
func (p NetworkPolicy) String() string {
	if p.Mode != NetworkAllow {
		return p.Mode
	}
	s := "allow"
	for i, a := range p.Allow {
		if i == 0 {
			s += " "
		} else {
			s += ", "
		}
		s += a
	}
	if len(p.Allow) == 0 {
		s += " (nothing)"
	}
	return s
}
