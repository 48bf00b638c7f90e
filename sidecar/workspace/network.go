package workspace

import (
	"context"
	"fmt"
	"strings"

	"github.com/patina-dev/patina/sidecar/egress"
	"github.com/patina-dev/patina/worktree"
)

// Network holds workspaces to their network policies, on the host: it
// puts a workspace's container on the sidecar's network (or takes it off)
// and tells the egress proxy its address and policy.
type Network interface {
	// Enforced is "" when policies other than none can be enforced, else
	// why not (no root, the engine on another host, a swarm...).
	Enforced() string
	// Apply holds a running workspace's container to p.
	Apply(ctx context.Context, workspaceID, containerID string, p egress.Policy) error
	// Forget drops a workspace that stopped or went away (its connections
	// are cut).
	Forget(workspaceID string)
}

// noNetwork is the Network of a sidecar that enforces nothing: only
// network none.
type noNetwork struct{ why string }

func (n noNetwork) Enforced() string { return n.why }
func (noNetwork) Apply(context.Context, string, string, egress.Policy) error {
	return nil
}
func (noNetwork) Forget(string) {}

// policy is the workspace's policy as recorded (the mode "bridge" of older
// records is "open").
func (md meta) policy() egress.Policy {
	p, err := egress.Parse(md.Network, md.NetworkAllow)
	if err != nil {
		return egress.Policy{Mode: NetworkNone} // a record patina did not write: nothing
	}
	return p
}

// parseNetwork checks a requested policy; nil is the default (open where
// it can be enforced, else none).
func (m *Manager) parseNetwork(req *NetworkPolicy) (egress.Policy, error) {
	why := m.cfg.Network.Enforced()
	if req == nil {
		if why != "" {
			return egress.Policy{Mode: NetworkNone}, nil
		}
		return egress.Policy{Mode: NetworkOpen}, nil
	}
	p, err := egress.Parse(req.Mode, req.Allow)
	if err != nil {
		return egress.Policy{}, fmt.Errorf("%w: network: %v", ErrInvalid, strings.TrimPrefix(err.Error(), egress.ErrInvalid.Error()+": "))
	}
	if p.Mode != NetworkNone && why != "" {
		return egress.Policy{}, fmt.Errorf("%w: network %s cannot be enforced by this sidecar (%s): only network none is available", ErrUnsupported, p.Mode, why)
	}
	return p, nil
}

// applyNetwork holds the workspace's running container to its policy;
// one that cannot be enforced leaves it without network.
func (w *workspace) applyNetwork(ctx context.Context) error {
	w.mu.Lock()
	md := w.meta
	w.mu.Unlock()
	p := md.policy()
	if why := w.m.cfg.Network.Enforced(); why != "" && p.Mode != NetworkNone {
		w.mu.Lock()
		w.notice = fmt.Sprintf("its network policy (%s) cannot be enforced by this sidecar (%s): it is held to network none where the engine allows (on a swarm, recreate it); set network none, or run the sidecar where it can enforce the policy", p.Mode, why)
		w.mu.Unlock()
		p = egress.Policy{Mode: NetworkNone}
	}
	if err := w.m.cfg.Network.Apply(ctx, md.ID, md.ContainerID, p); err != nil {
		return fmt.Errorf("apply the workspace's network policy: %w", err)
	}
	return nil
}

// SetNetwork changes a workspace's network policy, running or stopped:
// connections it no longer allows are cut at once. With narrow, a policy
// that allows anything the current one does not is refused (what an agent
// may ask for itself).
func (m *Manager) SetNetwork(ctx context.Context, idOrName string, req NetworkPolicy, narrow bool) (Info, error) {
	p, err := m.parseNetwork(&req)
	if err != nil {
		return Info{}, err
	}
	w, err := m.lifecycle(ctx, idOrName, func(w *workspace, ctx context.Context) error {
		w.mu.Lock()
		old := w.meta.policy()
		w.mu.Unlock()
		if narrow {
			if err := p.Narrows(old); err != nil {
				return fmt.Errorf("%w: %v", ErrInvalid, err)
			}
		}
		w.mu.Lock()
		prev, prevAllow := w.meta.Network, w.meta.NetworkAllow
		w.meta.Network, w.meta.NetworkAllow = p.Mode, p.AllowList()
		running := w.status == StatusRunning
		w.mu.Unlock()
		if running {
			if err := w.applyNetwork(ctx); err != nil {
				w.mu.Lock()
				w.meta.Network, w.meta.NetworkAllow = prev, prevAllow
				w.mu.Unlock()
				_ = w.applyNetwork(context.WithoutCancel(ctx))
				return err
			}
		}
		w.logEvent(worktree.Event{Kind: "network", Message: "network policy: " + p.String()})
		return w.save(ctx)
	})
	if err != nil {
		return Info{}, err
	}
	return w.view(), nil
}

// NetworkRefused records a connection or query the proxy refused in the
// workspace's event log.
func (m *Manager) NetworkRefused(workspaceID string, r egress.Refusal) {
	w, err := m.lookup(workspaceID)
	if err != nil {
		return
	}
	msg := fmt.Sprintf("refused %s: %s", r.Dest, r.Rule)
	if r.Dropped > 0 {
		msg += fmt.Sprintf(" (and %d more refused before, not logged)", r.Dropped)
	}
	w.logEvent(worktree.Event{Kind: "network-refused", Message: msg})
}
