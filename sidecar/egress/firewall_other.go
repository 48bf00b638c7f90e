//go:build !linux

package egress

import (
	"context"
	"fmt"
)

// InstallRules needs Linux's netfilter.
func InstallRules(ctx context.Context, r Rules) error {
	return fmt.Errorf("%w: the egress rules need Linux", ErrFirewall)
}

// RemoveRules needs Linux's netfilter.
func RemoveRules(ctx context.Context, iface string) error { return nil }
