package container

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/swarm"
	"golang.org/x/sys/unix"
)

// The sidecar reaches agents on other nodes through a relay container
// attached to each workspace's overlay network.

// StartAgent has nothing to start: the container's PID 1 keeps its agent
// running (see agent pause), and starts it again within 5 s of its death.
// It waits (up to a minute) until the agent takes connections again, as
// starting it does on a single engine. A task new on a node that came back
// may stay unreachable from the relay a while (the overlay's peers are
// learnt again): after 15 s the relay is attached to the network anew.
func (s *Swarm) StartAgent(ctx context.Context, id string, _ AgentStart) error {
	ctx, cancel := context.WithTimeout(ctx, agentStartTimeout)
	defer cancel()
	refresh := time.Now().Add(relayRefreshAfter)
	for {
		st, err := s.Inspect(ctx, id)
		if err != nil {
			return err
		}
		if !st.Running {
			return fmt.Errorf("service %s has no running task (%s)", short(id), st.Error)
		}
		dctx, dcancel := context.WithTimeout(ctx, agentDialTimeout)
		c, err := s.DialAgent(dctx, id)
		dcancel()
		if err == nil {
			c.Close()
			return nil
		}
		if !refresh.IsZero() && time.Now().After(refresh) {
			refresh = time.Time{}
			s.log.Info("the agent is not reachable yet: attaching the relay to its network again", "service", short(id), "err", err)
			if svc, _, err := s.api.ServiceInspectWithRaw(ctx, id, swarm.ServiceInspectOptions{}); err == nil {
				s.detachRelay(ctx, swarmNetwork(svc.Spec.Labels[LabelWorkspace]))
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the agent of service %s did not come back: %w", short(id), err)
		case <-time.After(swarmWaitPeriod):
		}
	}
}

// DialAgent connects to the workspace's agent: to its task's address on
// the workspace's overlay network (from the manager's task list, never
// from the workspace), from the relay container's network namespace.
func (s *Swarm) DialAgent(ctx context.Context, id string) (net.Conn, error) {
	svc, _, err := s.api.ServiceInspectWithRaw(ctx, id, swarm.ServiceInspectOptions{})
	if errdefs.IsNotFound(err) {
		return nil, fmt.Errorf("service %s: %w", short(id), ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	name := swarmNetwork(svc.Spec.Labels[LabelWorkspace])
	ts, err := s.tasks(ctx, id)
	if err != nil {
		return nil, err
	}
	var addr netip.Addr
	for _, t := range ts {
		if t.Status.State != swarm.TaskStateRunning {
			continue
		}
		for _, na := range t.NetworksAttachments {
			if na.Network.Spec.Name != name || len(na.Addresses) == 0 {
				continue
			}
			if p, err := netip.ParsePrefix(na.Addresses[0]); err == nil {
				addr = p.Addr()
			}
		}
	}
	if !addr.IsValid() {
		return nil, fmt.Errorf("service %s has no running task on network %s", short(id), name)
	}
	relay, err := s.relay(ctx, name)
	if err != nil {
		return nil, err
	}
	ns, err := s.local.netns(ctx, relay)
	if err != nil {
		s.forgetRelay(relay)
		return nil, fmt.Errorf("the relay container: %w", err)
	}
	defer ns.Close()
	var sa unix.Sockaddr
	if addr.Is4() {
		sa = &unix.SockaddrInet4{Port: swarmAgentPort, Addr: addr.As4()}
	} else {
		sa = &unix.SockaddrInet6{Port: swarmAgentPort, Addr: addr.As16()}
	}
	c, err := dialInNetns(ctx, ns, sa)
	if err != nil && !s.cfg.Unencrypted {
		err = fmt.Errorf("%w (workspace networks are encrypted: where the nodes' kernels lack IPsec ESP (esp4), or ESP cannot pass between nodes, nothing gets through; run the sidecar with --swarm-unencrypted on a trusted node network)", err)
	}
	return c, err
}

// relayName is the relay container of this state directory.
func (s *Swarm) relayName() string {
	h := sha256.Sum256([]byte(s.cfg.StateDir))
	return "patina-relay-" + hex.EncodeToString(h[:6])
}

// relay returns the relay container, made and attached to network if need
// be. It runs `patina agent pause` and nothing else; no port of it is
// published, and a workspace that reaches it on its network finds nothing
// listening (nor any route on: it forwards nothing).
func (s *Swarm) relay(ctx context.Context, netName string) (string, error) {
	s.relayMu.Lock()
	defer s.relayMu.Unlock()
	if s.relayID == "" {
		id, nets, err := s.ensureRelay(ctx)
		if err != nil {
			return "", err
		}
		s.relayID = id
		s.attached = map[string]bool{}
		for _, n := range nets {
			s.attached[n] = true
		}
	}
	if !s.attached[netName] {
		err := s.api.NetworkConnect(ctx, netName, s.relayID, nil)
		// A relay found running (a restarted sidecar) may be on it already.
		if err != nil && !strings.Contains(err.Error(), "already attached") && !strings.Contains(err.Error(), "already exists") {
			return "", fmt.Errorf("attach the relay to %s: %w", netName, err)
		}
		s.attached[netName] = true
	}
	return s.relayID, nil
}

// detachRelay takes the relay off a workspace's network; the next dial
// attaches it again.
func (s *Swarm) detachRelay(ctx context.Context, name string) {
	s.relayMu.Lock()
	relay := s.relayID
	delete(s.attached, name)
	s.relayMu.Unlock()
	if relay != "" {
		_ = s.api.NetworkDisconnect(ctx, name, relay, true)
	}
}

func (s *Swarm) forgetRelay(id string) {
	s.relayMu.Lock()
	if s.relayID == id {
		s.relayID = ""
	}
	s.relayMu.Unlock()
}

// ensureRelay finds or makes the running relay container and returns its
// id and the networks it is on. It is made from patina's own fill image
// (an empty directory: the binary is static, and comes from the verified
// agent volume), never from a workspace's image: it joins every
// workspace's network. A relay made from another image (by an older
// patina) is replaced.
func (s *Swarm) ensureRelay(ctx context.Context) (string, []string, error) {
	name := s.relayName()
	img, err := s.local.fillImage(ctx)
	if err != nil {
		return "", nil, fmt.Errorf("the relay container: %w", err)
	}
	vol, err := s.local.agent.ensure(ctx, s.local)
	if err != nil {
		return "", nil, err
	}
	if info, err := s.api.ContainerInspect(ctx, name); err == nil {
		if info.Config != nil && info.Config.Labels[LabelRole] == swarmRoleRelay && info.State != nil && info.State.Running && info.Image == img {
			var nets []string
			if info.NetworkSettings != nil {
				nets = slices.Collect(maps.Keys(info.NetworkSettings.Networks))
			}
			return info.ID, nets, nil
		}
		_ = s.api.ContainerRemove(ctx, info.ID, container.RemoveOptions{Force: true})
	}
	netID, err := s.local.ensureNetwork(ctx)
	if err != nil {
		return "", nil, err
	}
	labels := map[string]string{LabelManaged: "1", LabelStateDir: s.cfg.StateDir, LabelRole: swarmRoleRelay}
	resp, err := s.api.ContainerCreate(ctx, &container.Config{
		Image: img, Entrypoint: []string{AgentPath, "agent", "pause"}, Cmd: []string{}, Labels: labels,
	}, &container.HostConfig{
		Mounts:        []mount.Mount{agentMount(vol, AgentDir, true)},
		NetworkMode:   container.NetworkMode(netID),
		SecurityOpt:   []string{"no-new-privileges"},
		CapDrop:       []string{"ALL"},
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyUnlessStopped},
		// It joins every workspace's network: it must never route
		// between them.
		Sysctls: map[string]string{"net.ipv4.ip_forward": "0", "net.ipv6.conf.all.forwarding": "0"},
	}, nil, nil, name)
	if err != nil {
		return "", nil, fmt.Errorf("create the relay container: %w", err)
	}
	if err := s.api.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		return "", nil, fmt.Errorf("start the relay container: %w", err)
	}
	return resp.ID, nil, nil
}
