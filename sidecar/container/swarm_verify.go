package container

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/swarm"
)

// A workspace on a swarm runs its agent from the node's own binary
// (--node-binary, bind-mounted read-only), which the sidecar cannot read:
// the manager's API reaches no node's files. Nor can the node's binary
// vouch for itself (a substitute would say what it is asked to), nor can
// any image a workspace names (its sha256sum would lie). So the check runs
// the sidecar's own code on the node: a one-shot task from patina's agent
// image (the sidecar's binary as /patina and nothing else; see
// AgentImageOf), named by its ID. That ID is the sha256 of the image's
// config, which names the sha256 of its one layer, and the node's engine
// computed both itself when the image was loaded there: a node can run the
// task only if it holds exactly the sidecar's binary. The task reads the
// node binary (bind-mounted read-only, never run) and exits 0 only if its
// sha256 is the sidecar's; the sidecar reads the exit code from the
// manager's task list, which nothing in a workspace writes.
//
// A node that passes gets the label agentLabel()=<binary hash>; a new
// workspace's service is constrained to nodes with it until it is pinned
// to the node it landed on, and a stopped workspace's node is checked
// again (once per process) before its task is started there. Each node is
// checked once per sidecar process before it is first used, and the
// labels a previous process left are taken off first.

// agentImageRepo is the repository of patina's agent images, tagged with
// the first 16 hex digits of the binary's sha256.
const agentImageRepo = "patina/agent"

// How long a round of node checks may take, and the checked binary's path
// in the check's container.
const (
	nodeCheckTimeout = 2 * time.Minute
	// nodeCheckSlack is what the first round of checks in the background
	// may take beyond one node's check (listing the nodes, the service).
	nodeCheckSlack = time.Minute
	nodeCheckPath  = "/node/patina"
	swarmRoleCheck = "agent-check"
)

// Exit codes of `patina agent check-binary` (sidecar/cmd/patina).
const (
	checkExitDiffers = 3
	checkExitMissing = 4
)

// newAgentImage is the agent image of v's binary.
func newAgentImage(v *agentVolume) (*ownImage, error) {
	sum := hex.EncodeToString(v.sum[:])
	return newOwnImage(agentImageRepo+":"+sum[:16], "agent-image", nil, []ownFile{{
		name: "patina", mode: 0o755, size: v.size, open: v.binary,
	}})
}

// LoadAgentImage makes sure the engine of api has the agent image of the
// patina binary at path, loading it if need be, and returns its tag and
// ID. Run on each swarm node with the node's own binary (`patina image
// agent`), it makes there the very image the sidecar asks for, if and only
// if that binary is the sidecar's.
func LoadAgentImage(ctx context.Context, api ImageAPI, path string) (tag, id string, err error) {
	var v agentVolume
	if err := v.load(path); err != nil {
		return "", "", err
	}
	defer v.bin.Close()
	im, err := newAgentImage(&v)
	if err != nil {
		return "", "", err
	}
	id, err = ensureOwnImage(ctx, api, im)
	return im.tag, id, err
}

// nodeChecks is what this process found of each node's binary.
type nodeChecks struct {
	mu      sync.Mutex // one round at a time
	img     *ownImage
	imgErr  error
	imgOnce sync.Once
	swept   bool                 // the labels of earlier processes are off
	ok      map[string]bool      // node id: its binary is the sidecar's
	why     map[string]string    // node id: why not, from its last check
	failed  map[string]time.Time // node id: when its last check failed
}

// nodeRecheck is how long a node that failed its check is left alone by
// workspace creations (each would wait for a check of it otherwise);
// starting a workspace pinned to it checks it again at once.
const nodeRecheck = time.Minute

// agentImage is the sidecar's agent image.
func (s *Swarm) agentImage() (*ownImage, error) {
	c := &s.checks
	c.imgOnce.Do(func() { c.img, c.imgErr = newAgentImage(&s.local.agent) })
	return c.img, c.imgErr
}

// agentLabel is the node label (and its value) this sidecar sets on nodes
// whose binary it checked: one key per state directory, so sidecars of
// other state directories (or versions) keep their own.
func (s *Swarm) agentLabel() (key, value string) {
	return AgentLabelKey(s.cfg.StateDir), hex.EncodeToString(s.local.agent.sum[:])[:16]
}

// agentConstraint keeps a service on nodes this process checked.
func (s *Swarm) agentConstraint() string {
	k, v := s.agentLabel()
	return "node.labels." + k + "==" + v
}

// verifyNodes checks the binary of every ready, active node not checked
// yet by this process (or only of node, if not ""), and labels them. It
// returns why each unchecked or failed node cannot take a workspace.
// Errors are the engine's, not the nodes'.
func (s *Swarm) verifyNodes(ctx context.Context, node string) (map[string]string, error) {
	c := &s.checks
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ok == nil {
		c.ok, c.why, c.failed = map[string]bool{}, map[string]string{}, map[string]time.Time{}
	}
	im, err := s.agentImage()
	if err != nil {
		return nil, err
	}
	id, err := ensureOwnImage(ctx, s.api, im)
	if err != nil {
		return nil, fmt.Errorf("patina's agent image on the manager: %w", err)
	}
	nodes, err := s.api.NodeList(ctx, swarm.NodeListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list the swarm's nodes: %w", err)
	}
	key, val := s.agentLabel()
	if !c.swept {
		// What an earlier process labelled is not this one's word.
		for _, n := range nodes {
			if n.Spec.Labels[key] != "" {
				if err := s.setNodeLabel(ctx, n.ID, key, ""); err != nil {
					return nil, err
				}
			}
		}
		c.swept = true
	}
	var todo []swarm.Node
	for _, n := range nodes {
		if c.ok[n.ID] || (node != "" && n.ID != node) {
			continue
		}
		if n.Status.State != swarm.NodeStateReady || n.Spec.Availability != swarm.NodeAvailabilityActive {
			c.why[n.ID] = fmt.Sprintf("node %s is %s/%s", nodeName(n), n.Status.State, n.Spec.Availability)
			continue
		}
		if node == "" && time.Since(c.failed[n.ID]) < nodeRecheck {
			continue
		}
		todo = append(todo, n)
	}
	if len(todo) > 0 {
		t0 := time.Now()
		found, err := s.runNodeCheck(ctx, id, im.tag, node, todo)
		if err != nil {
			return nil, err
		}
		for _, n := range todo {
			why, checked := found[n.ID]
			if !checked {
				why = "its check did not finish within " + nodeCheckTimeout.String()
			}
			if why == "" {
				if err := s.setNodeLabel(ctx, n.ID, key, val); err != nil {
					return nil, err
				}
				c.ok[n.ID] = true
				delete(c.why, n.ID)
				delete(c.failed, n.ID)
				continue
			}
			c.why[n.ID] = fmt.Sprintf("node %s: %s", nodeName(n), why)
			c.failed[n.ID] = time.Now()
			s.log.Warn("a swarm node cannot take workspaces: its agent binary is not verified", "node", nodeName(n), "why", why)
			if err := s.setNodeLabel(ctx, n.ID, key, ""); err != nil {
				return nil, err
			}
		}
		s.log.Info("checked the agent's binary on the swarm's nodes", "checked", len(todo), "duration", time.Since(t0))
	}
	out := map[string]string{}
	for _, n := range nodes {
		if !c.ok[n.ID] && (node == "" || n.ID == node) {
			out[n.ID] = c.why[n.ID]
		}
	}
	return out, nil
}

// anyVerified reports whether some node passed its check in this process.
func (s *Swarm) anyVerified() bool {
	s.checks.mu.Lock()
	defer s.checks.mu.Unlock()
	for _, ok := range s.checks.ok {
		if ok {
			return true
		}
	}
	return false
}

// nodeName is a node's hostname and short id.
func nodeName(n swarm.Node) string {
	if n.Description.Hostname != "" {
		return n.Description.Hostname + " (" + short(n.ID) + ")"
	}
	return short(n.ID)
}

// whyNot joins why nodes cannot take a workspace, in a stable order.
func whyNot(why map[string]string) string {
	return strings.Join(slices.Sorted(maps.Values(why)), "; ")
}

// runNodeCheck runs the check on the nodes (a global service of one-shot
// tasks, constrained to node if not "", or to the nodes without this
// process's label), waits until each node's task has ended, and removes
// it. It returns, per node that ran it, "" if its binary is the sidecar's,
// else why not.
func (s *Swarm) runNodeCheck(ctx context.Context, imageID, tag, node string, nodes []swarm.Node) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, nodeCheckTimeout)
	defer cancel()
	key, val := s.agentLabel()
	constraints := []string{"node.labels." + key + "!=" + val}
	if node != "" {
		constraints = []string{"node.id==" + node}
	}
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	labels := map[string]string{LabelManaged: "1", LabelStateDir: s.cfg.StateDir, LabelRole: swarmRoleCheck}
	sum := hex.EncodeToString(s.local.agent.sum[:])
	resp, err := s.api.ServiceCreate(ctx, oneShot(oneShotSpec{
		Name: "patina-check-" + hex.EncodeToString(suffix), Labels: labels, Image: imageID,
		Command:     []string{"/patina", "agent", "check-binary", "--sha256", sum, nodeCheckPath},
		Mounts:      []mount.Mount{{Type: mount.TypeBind, Source: s.cfg.NodeBinary, Target: nodeCheckPath, ReadOnly: true}},
		Constraints: constraints,
	}), swarm.ServiceCreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("check the agent's binary on the swarm's nodes: %w", err)
	}
	defer func() { _ = s.api.ServiceRemove(context.WithoutCancel(ctx), resp.ID) }()
	want := map[string]bool{}
	for _, n := range nodes {
		want[n.ID] = true
	}
	found := map[string]string{}
	for {
		ts, err := s.api.TaskList(ctx, swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("service", resp.ID))})
		if err != nil && ctx.Err() == nil {
			return nil, fmt.Errorf("the tasks of the binary check: %w", err)
		}
		for _, t := range ts {
			if !want[t.NodeID] {
				continue
			}
			if why, done := checkResult(t, s.cfg.NodeBinary, tag, imageID); done {
				found[t.NodeID] = why
			}
		}
		if len(found) == len(want) {
			return found, nil
		}
		select {
		case <-ctx.Done():
			return found, nil
		case <-time.After(swarmWaitPeriod):
		}
	}
}

// checkResult reads a check's task: whether it has ended, and "" if the
// node's binary is the sidecar's, else why not, in the operator's terms.
func checkResult(t swarm.Task, nodeBinary, tag, imageID string) (string, bool) {
	exit := -1
	if cs := t.Status.ContainerStatus; cs != nil {
		exit = cs.ExitCode
	}
	switch t.Status.State {
	case swarm.TaskStateComplete:
		return "", true
	case swarm.TaskStateFailed:
		switch exit {
		case checkExitDiffers:
			return fmt.Sprintf("the patina binary at %s (--node-binary) is not this sidecar's: install the sidecar's own binary there", nodeBinary), true
		case checkExitMissing:
			return fmt.Sprintf("no patina binary at %s (--node-binary): install the sidecar's binary there", nodeBinary), true
		}
		return "its binary check failed: " + taskWhy(t), true
	case swarm.TaskStateRejected, swarm.TaskStateShutdown, swarm.TaskStateOrphaned, swarm.TaskStateRemove:
		msg := taskWhy(t)
		if strings.Contains(strings.ToLower(msg), "no such image") {
			return fmt.Sprintf("it does not have patina's agent image %s (%s), which checks its binary: run `patina image agent --binary %s` there (or docker save %s | docker load)", tag, short(strings.TrimPrefix(imageID, "sha256:")), nodeBinary, tag), true
		}
		if strings.Contains(msg, "bind source path does not exist") {
			return fmt.Sprintf("no patina binary at %s (--node-binary): install the sidecar's binary there", nodeBinary), true
		}
		return "its binary check did not run: " + msg, true
	}
	return "", false
}

// setNodeLabel sets (or, with value "", removes) a label of a node.
func (s *Swarm) setNodeLabel(ctx context.Context, id, key, value string) error {
	for attempt := 0; ; attempt++ {
		n, _, err := s.api.NodeInspectWithRaw(ctx, id)
		if errdefs.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("inspect node %s: %w", short(id), err)
		}
		spec := n.Spec
		if cur, has := spec.Labels[key]; (value == "" && !has) || (value != "" && cur == value) {
			return nil
		}
		spec.Labels = maps.Clone(spec.Labels)
		if spec.Labels == nil {
			spec.Labels = map[string]string{}
		}
		if value == "" {
			delete(spec.Labels, key)
		} else {
			spec.Labels[key] = value
		}
		err = s.api.NodeUpdate(ctx, id, n.Version, spec)
		if err == nil {
			return nil
		}
		if attempt >= 3 || !outOfSequence(err) {
			return fmt.Errorf("label node %s: %w", short(id), err)
		}
	}
}

// removeChecks removes the one-shot services (checks, volume cleanups) a
// previous process left.
func (s *Swarm) removeChecks(ctx context.Context) {
	for _, role := range []string{swarmRoleCheck, swarmRoleCleanup} {
		svcs, err := s.api.ServiceList(ctx, swarm.ServiceListOptions{Filters: filters.NewArgs(
			filters.Arg("label", LabelRole+"="+role), filters.Arg("label", LabelStateDir+"="+s.cfg.StateDir))})
		if err != nil {
			return
		}
		for _, svc := range svcs {
			_ = s.api.ServiceRemove(ctx, svc.ID)
		}
	}
}

// checkNodesSoon runs the first round of checks in the background, so
// that the first workspace need not wait for it (it waits for the round
// to end if it comes sooner).
func (s *Swarm) checkNodesSoon() {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), nodeCheckTimeout+nodeCheckSlack)
		defer cancel()
		if _, err := s.verifyNodes(ctx, ""); err != nil {
			s.log.Warn("check the agent's binary on the swarm's nodes", "err", err)
		}
	}()
}

// AgentLabelKey is the node label a sidecar of stateDir sets on nodes
// whose binary it checked (a benchmark's sidecar removes its own).
func AgentLabelKey(stateDir string) string {
	h := sha256.Sum256([]byte(stateDir))
	return "dev.patina.agent-" + hex.EncodeToString(h[:6])
}

// errNoVerifiedNode says that no node can take a workspace, and why.
func errNoVerifiedNode(why map[string]string) error {
	return fmt.Errorf("%w on any node of the swarm: %s", ErrAgentBinary, whyNot(why))
}
