package egress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

// iptablesWait bounds each iptables call, which waits for the xtables lock
// (Docker takes it too).
const iptablesWait = 30 * time.Second

func ipt(ctx context.Context, bin string, stdin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, iptablesWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", bin, strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// InstallRules puts r's rules in place, or replaces them (each table's
// chains in one atomic iptables-restore), and makes the jumps to them the
// first rules of their built-in chains. It is idempotent: the sidecar runs
// it at every start.
func InstallRules(ctx context.Context, r Rules) error {
	if len(r.Iface) == 0 || len(r.Iface) > 15 || r.ProxyPort <= 0 || r.DNSPort <= 0 {
		return fmt.Errorf("%w: bad rules %+v", ErrFirewall, r)
	}
	if _, err := net.InterfaceByName(r.Iface); err != nil {
		return fmt.Errorf("%w: the workspaces' bridge %s is not in this network namespace (is the sidecar in a container?): %v", ErrFirewall, r.Iface, err)
	}
	pre, in, fwd := chains(r.Iface)
	p, d := strconv.Itoa(r.ProxyPort), strconv.Itoa(r.DNSPort)
	v4 := strings.Join([]string{
		"*nat",
		":" + pre + " - [0:0]",
		"-A " + pre + " -p udp --dport 53 -j REDIRECT --to-ports " + d,
		"-A " + pre + " -p tcp --dport 53 -j REDIRECT --to-ports " + d,
		"-A " + pre + " -p tcp -j REDIRECT --to-ports " + p,
		"COMMIT",
		"*filter",
		":" + in + " - [0:0]",
		":" + fwd + " - [0:0]",
		// Answers to what the host itself opened to a workspace (the
		// bench's direct path): a workspace cannot open anything this way.
		"-A " + in + " -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT",
		"-A " + in + " -p tcp --dport " + p + " -j ACCEPT",
		"-A " + in + " -p tcp --dport " + d + " -j ACCEPT",
		"-A " + in + " -p udp --dport " + d + " -j ACCEPT",
		"-A " + in + " -p tcp -j REJECT --reject-with tcp-reset",
		"-A " + in + " -j REJECT --reject-with icmp-port-unreachable",
		"-A " + fwd + " -p tcp -j REJECT --reject-with tcp-reset",
		"-A " + fwd + " -j REJECT --reject-with icmp-admin-prohibited",
		"COMMIT", "",
	}, "\n")
	if _, err := ipt(ctx, "iptables-restore", v4, "--noflush", "--wait"); err != nil {
		return fmt.Errorf("%w: %v", ErrFirewall, err)
	}
	fwdChain := forwardChain(ctx, "iptables")
	for _, j := range []struct {
		table, chain string
		spec         []string
	}{
		{"nat", "PREROUTING", []string{"-i", r.Iface, "-j", pre}},
		{"filter", "INPUT", []string{"-i", r.Iface, "-j", in}},
		{"filter", fwdChain, []string{"-i", r.Iface, "-j", fwd}},
		{"filter", fwdChain, []string{"-o", r.Iface, "-j", fwd}},
	} {
		if err := ensureFirst(ctx, "iptables", j.table, j.chain, j.spec); err != nil {
			return fmt.Errorf("%w: %v", ErrFirewall, err)
		}
	}
	// IPv6: nothing from the bridge at all (workspaces have no IPv6
	// address; this is in case one appears).
	v6 := strings.Join([]string{
		"*filter",
		":" + in + " - [0:0]",
		":" + fwd + " - [0:0]",
		"-A " + in + " -j REJECT",
		"-A " + fwd + " -j REJECT",
		"COMMIT", "",
	}, "\n")
	if _, err := ipt(ctx, "ip6tables-restore", v6, "--noflush", "--wait"); err != nil {
		return fmt.Errorf("%w: %v", ErrFirewall, err)
	}
	fwd6 := forwardChain(ctx, "ip6tables")
	for _, j := range []struct {
		chain string
		spec  []string
	}{
		{"INPUT", []string{"-i", r.Iface, "-j", in}},
		{fwd6, []string{"-i", r.Iface, "-j", fwd}},
		{fwd6, []string{"-o", r.Iface, "-j", fwd}},
	} {
		if err := ensureFirst(ctx, "ip6tables", "filter", j.chain, j.spec); err != nil {
			return fmt.Errorf("%w: %v", ErrFirewall, err)
		}
	}
	return nil
}

// forwardChain is DOCKER-USER where Docker made it (Docker keeps it first
// in FORWARD), else FORWARD.
func forwardChain(ctx context.Context, bin string) string {
	if _, err := ipt(ctx, bin, "", "--wait", "-t", "filter", "-S", "DOCKER-USER"); err == nil {
		return "DOCKER-USER"
	}
	return "FORWARD"
}

// ensureFirst makes the rule spec the first of chain, exactly once, never
// leaving the chain without it once it was there.
func ensureFirst(ctx context.Context, bin, table, chain string, spec []string) error {
	idx, err := ruleIndexes(ctx, bin, table, chain, spec)
	if err != nil {
		return err
	}
	extra := idx
	if len(idx) > 0 && idx[0] == 1 {
		extra = idx[1:]
	} else {
		if _, err := ipt(ctx, bin, "", append([]string{"--wait", "-t", table, "-I", chain, "1"}, spec...)...); err != nil {
			return err
		}
		for i := range extra {
			extra[i]++
		}
	}
	slices.Sort(extra)
	for i := len(extra) - 1; i >= 0; i-- {
		if _, err := ipt(ctx, bin, "", "--wait", "-t", table, "-D", chain, strconv.Itoa(extra[i])); err != nil {
			return err
		}
	}
	return nil
}

// ruleIndexes lists the positions (from 1) of spec in chain.
func ruleIndexes(ctx context.Context, bin, table, chain string, spec []string) ([]int, error) {
	out, err := ipt(ctx, bin, "", "--wait", "-t", table, "-S", chain)
	if err != nil {
		return nil, err
	}
	want := "-A " + chain + " " + strings.Join(spec, " ")
	var idx []int
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "-A ") {
			continue
		}
		n++
		if strings.TrimSpace(line) == want {
			idx = append(idx, n)
		}
	}
	return idx, nil
}

// RemoveRules removes an interface's rules (when its network is removed).
func RemoveRules(ctx context.Context, iface string) error {
	pre, in, fwd := chains(iface)
	var errs []error
	for _, bin := range []string{"iptables", "ip6tables"} {
		fc := forwardChain(ctx, bin)
		jumps := []struct {
			table, chain string
			spec         []string
		}{
			{"filter", "INPUT", []string{"-i", iface, "-j", in}},
			{"filter", fc, []string{"-i", iface, "-j", fwd}},
			{"filter", fc, []string{"-o", iface, "-j", fwd}},
		}
		if bin == "iptables" {
			jumps = append(jumps, struct {
				table, chain string
				spec         []string
			}{"nat", "PREROUTING", []string{"-i", iface, "-j", pre}})
		}
		for _, j := range jumps {
			idx, err := ruleIndexes(ctx, bin, j.table, j.chain, j.spec)
			if err != nil {
				continue
			}
			for i := len(idx) - 1; i >= 0; i-- {
				if _, err := ipt(ctx, bin, "", "--wait", "-t", j.table, "-D", j.chain, strconv.Itoa(idx[i])); err != nil {
					errs = append(errs, err)
				}
			}
		}
		tables := map[string][]string{"filter": {in, fwd}}
		if bin == "iptables" {
			tables["nat"] = []string{pre}
		}
		for table, cs := range tables {
			for _, c := range cs {
				if _, err := ipt(ctx, bin, "", "--wait", "-t", table, "-F", c); err != nil {
					continue // not there
				}
				if _, err := ipt(ctx, bin, "", "--wait", "-t", table, "-X", c); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}
