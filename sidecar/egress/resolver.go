package egress

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// Bounds of the proxy's own name cache.
const (
	maxTTL      = 30 * time.Second
	negativeTTL = 5 * time.Second
	queryWait   = 3 * time.Second
)

// resolver resolves names for the proxy with the upstream DNS server (never
// with anything a workspace answered), caching answers briefly.
type resolver struct {
	upstream string
	max      int

	mu    sync.Mutex
	cache map[string]cached
}

type cached struct {
	addrs   []netip.Addr
	err     error
	expires time.Time
}

func newResolver(upstream string, max int) *resolver {
	return &resolver{upstream: upstream, max: max, cache: map[string]cached{}}
}

// lookup returns name's IPv4 then IPv6 addresses.
func (r *resolver) lookup(ctx context.Context, name string) ([]netip.Addr, error) {
	r.mu.Lock()
	c, ok := r.cache[name]
	r.mu.Unlock()
	if ok && time.Now().Before(c.expires) {
		return c.addrs, c.err
	}
	type answer struct {
		addrs []netip.Addr
		ttl   time.Duration
		err   error
	}
	ch := make(chan answer, 2)
	for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA} {
		go func() {
			a, ttl, err := r.query(ctx, name, qt)
			ch <- answer{a, ttl, err}
		}()
	}
	var v4, v6 []netip.Addr
	ttl := maxTTL
	var errs []error
	for range 2 {
		a := <-ch
		if a.err != nil {
			errs = append(errs, a.err)
			continue
		}
		ttl = min(ttl, a.ttl)
		for _, ad := range a.addrs {
			if ad.Is4() {
				v4 = append(v4, ad)
			} else {
				v6 = append(v6, ad)
			}
		}
	}
	addrs := append(v4, v6...)
	var err error
	if len(addrs) == 0 {
		err = errors.Join(errs...)
		if err == nil {
			err = errors.New("no address")
		}
		ttl = negativeTTL
	}
	r.mu.Lock()
	if len(r.cache) >= r.max {
		for k := range r.cache { // drop any one
			delete(r.cache, k)
			break
		}
	}
	r.cache[name] = cached{addrs: addrs, err: err, expires: time.Now().Add(max(ttl, time.Second))}
	r.mu.Unlock()
	return addrs, err
}

// query asks the upstream server for one type of record.
func (r *resolver) query(ctx context.Context, name string, qt uint16) ([]netip.Addr, time.Duration, error) {
	msg := new(dns.Msg)
	msg.SetQuestion(dns.Fqdn(name), qt)
	msg.RecursionDesired = true
	resp, err := exchange(ctx, r.upstream, msg, "udp")
	if err != nil {
		return nil, 0, err
	}
	if resp.Rcode != dns.RcodeSuccess {
		return nil, 0, fmt.Errorf("%s", dns.RcodeToString[resp.Rcode])
	}
	ttl := maxTTL
	var out []netip.Addr
	for _, rr := range resp.Answer {
		switch v := rr.(type) {
		case *dns.A:
			if a, ok := netip.AddrFromSlice(v.A.To4()); ok {
				out = append(out, a)
				ttl = min(ttl, time.Duration(v.Hdr.Ttl)*time.Second)
			}
		case *dns.AAAA:
			if a, ok := netip.AddrFromSlice(v.AAAA); ok {
				out = append(out, a)
				ttl = min(ttl, time.Duration(v.Hdr.Ttl)*time.Second)
			}
		}
	}
	return out, ttl, nil
}

// exchange sends msg to the upstream server over net ("udp" or "tcp"),
// again over TCP when a UDP answer is truncated.
func exchange(ctx context.Context, upstream string, msg *dns.Msg, network string) (*dns.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, queryWait)
	defer cancel()
	c := &dns.Client{Net: network, Timeout: queryWait}
	resp, _, err := c.ExchangeContext(ctx, msg, upstream)
	if err == nil && resp.Truncated && network == "udp" {
		c.Net = "tcp"
		resp, _, err = c.ExchangeContext(ctx, msg, upstream)
	}
	if err != nil {
		return nil, fmt.Errorf("DNS server %s: %w", upstream, err)
	}
	return resp, nil
}
