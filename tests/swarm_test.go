package tests

import (
	"compress/gzip"
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/patina-dev/patina/internal/daggerws"
	"github.com/patina-dev/patina/sidecar/bench"
	pclient "github.com/patina-dev/patina/sidecar/client"
	pcontainer "github.com/patina-dev/patina/sidecar/container"
)

// Swarm is a two-node Docker Swarm made for a test: this host's engine as
// the manager, advertising its address on the second engine's veth pair,
// and the second engine as a worker.
type Swarm struct {
	Manager, Worker string // node ids
}

// StartSwarm makes this host's engine a swarm manager and e a worker of
// it. At the end both leave, and the networks the swarm made on this host
// go: the engine is left as it was found. An engine already in a swarm is
// not touched: the test fails and says so.
func StartSwarm(t *testing.T, e *SecondEngine) *Swarm {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	local, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { local.Close() })
	info, err := local.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Swarm.LocalNodeState != swarm.LocalNodeStateInactive {
		t.Fatalf("this host's Docker engine is already in a swarm (%s): the swarm tests make their own; leave it first (docker swarm leave --force)", info.Swarm.LocalNodeState)
	}
	hadGWBridge := networkExists(ctx, local, "docker_gwbridge")
	hostAddr := strings.TrimSuffix(e.Addr, ".2") + ".1"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = e.Client(t).SwarmLeave(ctx, true)
		if err := local.SwarmLeave(ctx, true); err != nil {
			t.Logf("leave the swarm: %v", err)
		}
		if !hadGWBridge {
			// The bridge is freed a moment after the swarm's last sandbox.
			for i := 0; i < 50 && networkExists(ctx, local, "docker_gwbridge"); i++ {
				if local.NetworkRemove(ctx, "docker_gwbridge") == nil {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
	})
	if _, err := local.SwarmInit(ctx, swarm.InitRequest{ListenAddr: hostAddr + ":2377", AdvertiseAddr: hostAddr}); err != nil {
		t.Fatalf("docker swarm init: %v", err)
	}
	sw, err := local.SwarmInspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wc := e.Client(t)
	if err := wc.SwarmJoin(ctx, swarm.JoinRequest{
		ListenAddr: e.Addr + ":2377", AdvertiseAddr: e.Addr,
		RemoteAddrs: []string{hostAddr + ":2377"}, JoinToken: sw.JoinTokens.Worker,
	}); err != nil {
		t.Fatalf("the second engine joins the swarm: %v", err)
	}
	winfo, err := wc.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	linfo, _ := local.Info(ctx)
	s := &Swarm{Manager: linfo.Swarm.NodeID, Worker: winfo.Swarm.NodeID}
	WaitFor(t, "the worker to be ready", time.Minute, func() bool {
		n, _, err := local.NodeInspectWithRaw(ctx, s.Worker)
		return err == nil && n.Status.State == swarm.NodeStateReady
	})
	return s
}

// fileSum is the sha256 of a file, in hex.
func fileSum(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func networkExists(ctx context.Context, c *client.Client, name string) bool {
	list, err := c.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("name", name))})
	if err != nil {
		return false
	}
	return slices.ContainsFunc(list, func(n network.Summary) bool { return n.Name == name })
}

// runningTask is the running task of a workspace's service, from the
// manager.
func runningTask(t *testing.T, c *client.Client, serviceID string) swarm.Task {
	t.Helper()
	ts, err := c.TaskList(context.Background(), swarm.TaskListOptions{Filters: filters.NewArgs(
		filters.Arg("service", serviceID), filters.Arg("desired-state", "running"))})
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range ts {
		if tk.Status.State == swarm.TaskStateRunning {
			return tk
		}
	}
	t.Fatalf("service %s has no running task: %+v", serviceID, ts)
	return swarm.Task{}
}

// serviceNode is the node the running task of a workspace's service is on.
func serviceNode(t *testing.T, c *client.Client, serviceID string) string {
	t.Helper()
	return runningTask(t, c, serviceID).NodeID
}

// taskAddr is the address of a workspace's running task on its own
// network.
func taskAddr(t *testing.T, c *client.Client, serviceID string) string {
	t.Helper()
	for _, na := range runningTask(t, c, serviceID).NetworksAttachments {
		if strings.HasPrefix(na.Network.Spec.Name, "patina-ws-") && len(na.Addresses) > 0 {
			return strings.Split(na.Addresses[0], "/")[0]
		}
	}
	t.Fatalf("no address for service %s", serviceID)
	return ""
}

// patina serve --engine swarm on a two-node swarm (this host the manager,
// a second engine in its own network namespace the worker): workspaces
// placed on the worker by constraint, pinned there, their agents reached
// over their own encrypted overlay network through the relay container;
// the six isolation tests there; stop and start keep the node and the
// state; what a cluster cannot do yet is refused with a clear 400.
func TestSwarm(t *testing.T) {
	RequireDocker(t)
	e := StartSecondEngine(t)
	sw := StartSwarm(t, e)
	dc, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	ctx := context.Background()
	// Both nodes see this host's files: the binary is at the same path on
	// each, as --node-binary wants. Encrypted overlays need IPsec ESP in the
	// kernel; without it (as on this CI's VM: no esp4 module) nothing
	// passes, so they are left unencrypted here.
	// The worker's Docker socket is not at the default path here (both
	// engines share this host's files).
	args := []string{"--engine", "swarm", "--node-binary", Binary(t), "--swarm-node-socket", e.Socket}
	if _, err := os.Stat("/sys/module/esp4"); err != nil {
		t.Log("this kernel has no esp4 (IPsec ESP): the workspaces' overlay networks are unencrypted in this test")
		args = append(args, "--swarm-unencrypted")
	}
	onWorker := []string{"node.role==worker"}
	workerVolumes := func() int {
		vs, err := e.Client(t).VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(filters.Arg("label", "dev.patina.managed=1"))})
		if err != nil {
			t.Fatal(err)
		}
		return len(vs.Volumes)
	}

	t.Run("encrypted overlays on a kernel without ESP: serve refuses, saying what to do", func(t *testing.T) {
		if !kernelLacksESP() {
			t.Skip("this kernel has IPsec ESP, or its configuration cannot be read: the refusal cannot be seen here")
		}
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		cmd := exec.CommandContext(cctx, Binary(t), "serve", "--addr", "127.0.0.1:0", "--state-dir", t.TempDir(), "--token", "esp", "--engine", "swarm", "--node-binary", Binary(t))
		out, err := cmd.CombinedOutput()
		if err == nil || cctx.Err() != nil || !strings.Contains(string(out), "modprobe esp4") || !strings.Contains(string(out), "--swarm-unencrypted") {
			t.Fatalf("exp serve to refuse at once, naming modprobe esp4 and --swarm-unencrypted, got %v:\n%s", err, lastLines(string(out), 10))
		}
		t.Logf("refused: %s", lastLines(string(out), 2))
	})

	// Before any node can run workspaces: the sidecar's agent image is on
	// the manager only (the sidecar makes it there), and a sidecar whose
	// --node-binary is a substitute of the binary's size checks each node
	// and runs nothing.
	agentImage := "patina/agent:" + fileSum(t, Binary(t))[:16]
	t.Run("a node whose binary is not the sidecar's runs nothing", func(t *testing.T) {
		b, err := os.ReadFile(Binary(t))
		if err != nil {
			t.Fatal(err)
		}
		fake := filepath.Join(t.TempDir(), "patina")
		if err := os.WriteFile(fake, hostileScript(t, int64(len(b))), 0o755); err != nil {
			t.Fatal(err)
		}
		bad := slices.Clone(args)
		bad[3] = fake // --node-binary
		h2 := StartWith(t, t.TempDir(), "e2e-swarm-check", nil, bad)
		defer h2.Kill9()
		_, err = h2.Client.CreateWorkspace(ctx, pclient.CreateWorkspaceRequest{Name: "checked"})
		if !IsCode(err, pclient.CodeUnavailable) || !strings.Contains(err.Error(), "is not this sidecar's") || !strings.Contains(err.Error(), "patina image agent") {
			t.Fatalf("exp 503 saying the manager's binary is another and the worker lacks the agent image, got %v", err)
		}
		t.Logf("refused: %v", err)
		for _, l := range strings.Split(h2.Logs(), "\n") {
			if strings.Contains(l, "checked the agent's binary") {
				t.Logf("the check of the nodes: %s", l)
			}
		}
		svcs, err := dc.ServiceList(ctx, swarm.ServiceListOptions{Filters: filters.NewArgs(filters.Arg("label", "dev.patina.state-dir="+h2.StateDir))})
		if err != nil || len(svcs) != 0 {
			t.Fatalf("exp no service left of the refused sidecar, got %d (%v)", len(svcs), err)
		}
	})
	e.copyImage(t, agentImage) // as `patina image agent` on the node makes it
	t.Cleanup(func() { _, _ = dc.ImageRemove(context.Background(), agentImage, image.RemoveOptions{}) })

	h := StartWith(t, t.TempDir(), "e2e-swarm", nil, args)

	t.Run("isolation on the worker", func(t *testing.T) {
		checkSessionIsolationIn(t, h, pclient.CreateWorkspaceRequest{Name: "iso", Placement: onWorker})
		ws, err := h.Client.GetWorkspace(ctx, "iso")
		if err != nil {
			t.Fatal(err)
		}
		if n := serviceNode(t, dc, ws.ContainerID); n != sw.Worker {
			t.Fatalf("exp the workspace on the worker %s, it is on %s", sw.Worker, n)
		}
	})

	t.Run("placed, pinned, stop and start", func(t *testing.T) {
		ws := h.CreateWorkspace(pclient.CreateWorkspaceRequest{Name: "far", Placement: onWorker})
		if !slices.Equal(ws.Placement, onWorker) {
			t.Fatalf("placement not reported: %+v", ws.Placement)
		}
		if n := serviceNode(t, dc, ws.ContainerID); n != sw.Worker {
			t.Fatalf("exp the workspace on the worker %s, it is on %s", sw.Worker, n)
		}
		svc, _, err := dc.ServiceInspectWithRaw(ctx, ws.ContainerID, swarm.ServiceInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cs := svc.Spec.TaskTemplate.Placement.Constraints; !slices.Contains(cs, "node.id=="+sw.Worker) || len(cs) != 2 {
			t.Fatalf("exp the service pinned to its node (and no more on the label of checked nodes), constraints %v", cs)
		}
		// The worker was checked: labelled with the binary's hash.
		n, _, err := dc.NodeInspectWithRaw(ctx, sw.Worker)
		if err != nil || n.Spec.Labels[pcontainer.AgentLabelKey(h.StateDir)] != fileSum(t, Binary(t))[:16] {
			t.Fatalf("exp the worker labelled as checked, labels %v (%v)", n.Spec.Labels, err)
		}
		// The container is on the worker's engine, not this host's.
		cs, err := e.Client(t).ContainerList(ctx, container.ListOptions{Filters: filters.NewArgs(filters.Arg("label", "dev.patina.workspace="+ws.ID))})
		if err != nil || len(cs) != 1 {
			t.Fatalf("exp the workspace's container on the worker engine: %v %v", cs, err)
		}
		checkStopStartKeepsState(t, h, "far")
		if n := serviceNode(t, dc, ws.ContainerID); n != sw.Worker {
			t.Fatalf("exp the workspace back on its node %s, it is on %s", sw.Worker, n)
		}
		// A port forward travels on the agent's channel, as anywhere.
		p := startTestServer(t, h, "far", "127.0.0.1:3000", 3000)
		if got := httpGet(t, "http://"+p.Address+"/hello"); !strings.HasPrefix(got, "hello from ") {
			t.Fatalf("port forward on the swarm: %q", got)
		}
	})

	t.Run("hostile workspace on the cluster", func(t *testing.T) {
		ws, err := h.Client.GetWorkspace(ctx, "far")
		if err != nil {
			t.Fatal(err)
		}
		// The agent's binary is the node's, mounted read-only.
		if got := h.Out("far", "default", "echo x > /.patina/bin/patina 2>/dev/null; echo rc=$?"); got == "rc=0\n" {
			t.Fatal("the workspace could write over its agent's binary")
		}
		// The relay shares the workspace's network: nothing listens on it,
		// and it routes nowhere.
		cs, err := dc.ContainerList(ctx, container.ListOptions{Filters: filters.NewArgs(
			filters.Arg("label", "dev.patina.role=relay"), filters.Arg("label", "dev.patina.state-dir="+h.StateDir))})
		if err != nil || len(cs) != 1 {
			t.Fatalf("exp one relay container: %v %v", cs, err)
		}
		info, err := dc.ContainerInspect(ctx, cs[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		ep := info.NetworkSettings.Networks["patina-ws-"+ws.ID]
		if ep == nil || ep.IPAddress == "" {
			t.Fatalf("the relay is not on the workspace's network: %+v", info.NetworkSettings.Networks)
		}
		probe := "for p in 22 80 2375 7070 7071; do timeout 3 bash -c \"echo > /dev/tcp/" + ep.IPAddress + "/$p\" 2>/dev/null && echo open $p; done; echo probed"
		if got := h.Out("far", "default", probe); got != "probed\n" {
			t.Fatalf("a port of the relay answers the workspace: %q", got)
		}
		for _, k := range []string{"net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding"} {
			if v := info.HostConfig.Sysctls[k]; v != "0" {
				t.Fatalf("the relay may forward (%s=%q)", k, v)
			}
		}
	})

	t.Run("agent killed from inside comes back", func(t *testing.T) {
		// kill -9 -1 ends every process the workspace may signal: its
		// shells and its agent, not PID 1, which starts the agent again.
		kctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, _ = h.Client.Exec(kctx, "far", "default", pclient.ExecRequest{Command: "kill -9 -1", TimeoutMS: 5000}) // its session dies with it
		cancel()
		WaitFor(t, "the workspace to answer again", 30*time.Second, func() bool {
			ectx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if err := pclient.EnsureSession(ectx, h.Client, "far", "after"); err != nil {
				t.Logf("not yet: %v", err)
				return false
			}
			res, err := h.Client.Exec(ectx, "far", "after", pclient.ExecRequest{Command: "echo back; cat /workspace/f"})
			if err != nil || res.Stdout != "back\ndata\n" {
				t.Logf("not yet: %q %v", res.Stdout, err)
				return false
			}
			return true
		})
		ws, err := h.Client.GetWorkspace(ctx, "far")
		if err != nil || ws.Agent == nil || ws.Agent.Restarts < 1 {
			t.Fatalf("exp the API to count the agent's restart: %+v %v", ws.Agent, err)
		}
	})

	t.Run("exec p50, worker against manager", func(t *testing.T) {
		h.CreateWorkspace(pclient.CreateWorkspaceRequest{Name: "near", Placement: []string{"node.role==manager"}})
		p50 := func(ws string) time.Duration {
			var lat []time.Duration
			for i := 0; i < 300; i++ {
				t0 := time.Now()
				h.Exec(ws, "default", "true")
				lat = append(lat, time.Since(t0))
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			return lat[len(lat)/2]
		}
		// Workspaces share no network: far cannot reach near's agent.
		nearWS, err := h.Client.GetWorkspace(ctx, "near")
		if err != nil {
			t.Fatal(err)
		}
		ip := taskAddr(t, dc, nearWS.ContainerID)
		res := h.Exec("far", "default", "timeout 5 bash -c 'echo > /dev/tcp/"+ip+"/7071' && echo reached || echo unreachable")
		if res.Stdout != "unreachable\n" {
			t.Fatalf("workspace far reached near's agent at %s: %q %q", ip, res.Stdout, res.Stderr)
		}
		p50("near") // warm both
		p50("far")
		near, far := p50("near"), p50("far")
		t.Logf("swarm: HTTP exec of true p50 on the manager's node %s, on the worker %s: %.2fx", near, far, float64(far)/float64(near))
	})

	t.Run("async, SSE, follow, history and files on the worker", func(t *testing.T) {
		h.CreateSession("far", pclient.CreateSessionRequest{ID: "streams"})
		// SSE: the output arrives chunk by chunk, then the result.
		var chunks []string
		res, err := h.Client.ExecStream(ctx, "far", "streams", pclient.ExecRequest{Command: "for i in 1 2 3; do echo $i; sleep 0.2; done; echo err >&2"},
			func(stream string, data []byte) { chunks = append(chunks, stream+":"+string(data)) })
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("exec stream: %+v %v", res, err)
		}
		if got := strings.Join(chunks, ""); !strings.Contains(got, "stdout:1\n") || !strings.Contains(got, "stdout:3\n") || !strings.Contains(got, "stderr:err\n") || len(chunks) < 3 {
			t.Fatalf("exp the output streamed in chunks, got %q", chunks)
		}
		// Async, then follow the output until the command ends.
		id, err := h.Client.Start(ctx, "far", "streams", pclient.ExecRequest{Command: "for i in a b c; do echo $i; sleep 0.3; done"})
		if err != nil {
			t.Fatal(err)
		}
		rc, err := h.Client.OpenOutput(ctx, "far", "streams", id, "stdout", 0, true)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || string(b) != "a\nb\nc\n" {
			t.Fatalf("follow: %q %v", b, err)
		}
		hist, err := h.Client.History(ctx, "far", "streams")
		if err != nil || len(hist) != 2 || hist[1].ID != id || hist[1].State != "finished" {
			t.Fatalf("history: %+v %v", hist, err)
		}
		// Files through the API.
		if err := h.Client.WriteFile(ctx, "far", "up/loaded.txt", []byte("uploaded\n")); err != nil {
			t.Fatal(err)
		}
		if got := h.Out("far", "streams", "cat /workspace/up/loaded.txt"); got != "uploaded\n" {
			t.Fatalf("uploaded file: %q", got)
		}
		if got, err := h.Client.ReadFile(ctx, "far", "up/loaded.txt"); err != nil || string(got) != "uploaded\n" {
			t.Fatalf("read file: %q %v", got, err)
		}
	})

	// The repository is the parent's: a subtest's TempDir is gone when
	// the next one runs.
	repo := GitRepo(t, map[string]string{"a": "a\n", "src/b.txt": "b\n"})
	t.Run("repository round trip on the worker", func(t *testing.T) {
		ws := checkRepoRoundTrip(t, h, repo, "far-repo", onWorker...)
		if n := serviceNode(t, dc, ws.ContainerID); n != sw.Worker {
			t.Fatalf("exp the repository workspace on the worker %s, it is on %s", sw.Worker, n)
		}
		if ws.Worktree != "" {
			t.Fatalf("exp no host directory for a workspace on another node, got %q", ws.Worktree)
		}
	})
	t.Run("hostile: the shipped objects wrecked from inside, on the worker", func(t *testing.T) {
		checkWreckedStore(t, h, repo, "wreck", onWorker...)
	})
	t.Run("a 100 MB repository on the worker", func(t *testing.T) {
		big := bigRepo(t, 100<<20)
		t0 := time.Now()
		h.CreateWorkspace(pclient.CreateWorkspaceRequest{Name: "big", Repo: big, Placement: onWorker})
		got := h.Out("big", "default", "cd /workspace && du -sm --exclude=.git . | cut -f1")
		if mb, err := strconv.Atoi(strings.TrimSpace(got)); err != nil || mb < 100 {
			t.Fatalf("exp about 100 MB of files checked out, got %q MB", got)
		}
		took := time.Since(t0)
		h.Out("big", "default", "cd /workspace && echo change > blob-000 && git add -A && git commit -qm change")
		if _, err := h.Client.Diff(ctx, "big"); err != nil {
			t.Fatalf("diff of the big workspace: %v", err)
		}
		if _, err := h.Client.Merge(ctx, "big", pclient.MergeRequest{}); err != nil {
			t.Fatalf("merge from the big workspace: %v", err)
		}
		t.Logf("swarm: create -> first exec of a 100 MB repository workspace on the worker: %s", took.Round(10*time.Millisecond))
		if err := h.Client.DeleteWorkspace(ctx, "big", pclient.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("sidecar kill -9 mid-command, workspace on the worker", func(t *testing.T) {
		checkKill9MidCommand(t, h, "far")
	})

	t.Run("the node's engine stops, then returns", func(t *testing.T) {
		e.StopDaemon()
		WaitFor(t, "the workspace on the stopped node to show stopped", 90*time.Second, func() bool {
			ws, err := h.Client.GetWorkspace(ctx, "far")
			return err == nil && ws.Status == pclient.StatusStopped && strings.Contains(ws.Error, "down")
		})
		ws, _ := h.Client.GetWorkspace(ctx, "far")
		t.Logf("while its node is down: %s: %s", ws.Status, ws.Error)
		if _, err := h.Client.StartWorkspace(ctx, "far"); !IsCode(err, pclient.CodeUnavailable) || !strings.Contains(err.Error(), "down") {
			t.Fatalf("exp start to say the node is down (503), got %v", err)
		}
		e.StartDaemon(t)
		WaitFor(t, "the worker to be ready again", 90*time.Second, func() bool {
			n, _, err := dc.NodeInspectWithRaw(ctx, sw.Worker)
			return err == nil && n.Status.State == swarm.NodeStateReady
		})
		sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		if _, err := h.Client.StartWorkspace(sctx, "far"); err != nil {
			t.Fatalf("start once the node is back: %v\n%s", err, lastLines(h.Logs(), 20))
		}
		if got := h.Out("far", "default", "cat /workspace/f"); got != "data\n" {
			t.Fatalf("exp the workspace's files back with it, got %q", got)
		}
		if n := serviceNode(t, dc, ws.ContainerID); n != sw.Worker {
			t.Fatalf("exp the workspace back on its node %s, it is on %s", sw.Worker, n)
		}
	})

	t.Run("bench --engine swarm", func(t *testing.T) {
		volumesBefore := workerVolumes()
		bargs := []string{"bench", "--engine", "swarm", "--node-binary", Binary(t), "--swarm-node-socket", e.Socket, "--samples", "200", "--create-samples", "2", "--json"}
		if slices.Contains(args, "--swarm-unencrypted") {
			bargs = append(bargs, "--swarm-unencrypted")
		}
		cmd := exec.Command(Binary(t), bargs...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("patina bench --engine swarm: %v\n%s", err, lastLines(stderr.String(), 20))
		}
		var rep bench.SwarmReport
		if err := json.Unmarshal(out, &rep); err != nil {
			t.Fatalf("bench's JSON: %v\n%s", err, out)
		}
		if rep.NearExec.Samples != 200 || rep.FarExec.Samples != 200 || rep.FarCreate.Samples != 2 || rep.Ratio <= 0 || len(rep.Checks) != 1 {
			t.Fatalf("exp every figure measured, got %+v", rep)
		}
		if !strings.Contains(rep.Far, sw.Worker[:12]) {
			t.Fatalf("exp the far node to be the worker %s, got %s", sw.Worker, rep.Far)
		}
		if n := workerVolumes(); n != volumesBefore {
			t.Fatalf("bench left volumes on the worker: %d there before it, %d after", volumesBefore, n)
		}
		t.Logf("bench --engine swarm: exec p50 near %.3f ms, far %.3f ms: %.2fx (target <= %gx); create -> first exec p50 near %.0f ms, far %.0f ms",
			rep.NearExec.P50MS, rep.FarExec.P50MS, rep.Ratio, bench.TargetSwarmExecRatio, rep.NearCreate.P50MS, rep.FarCreate.P50MS)
	})

	t.Run("the sidecar as a container on the manager", func(t *testing.T) {
		// As README's container deployment, plus what the swarm engine
		// needs to dial from the relay's network namespace: the host's pid
		// namespace (to find the relay's) and CAP_SYS_ADMIN (to enter it).
		stateDir := t.TempDir()
		cargs := slices.Clone(args[:4]) // --engine swarm --node-binary PATH
		if slices.Contains(args, "--swarm-unencrypted") {
			cargs = append(cargs, "--swarm-unencrypted")
		}
		c := startContainerizedSidecar(t, dc, stateDir, cargs, &container.HostConfig{
			Binds: []string{repo + ":" + repo}, PidMode: "host", CapAdd: []string{"SYS_ADMIN"},
		})
		ws, err := c.CreateWorkspace(ctx, pclient.CreateWorkspaceRequest{Name: "boxed", Repo: repo, Placement: onWorker})
		if err != nil {
			t.Fatalf("create a repository workspace on the worker: %v", err)
		}
		if n := serviceNode(t, dc, ws.ContainerID); n != sw.Worker {
			t.Fatalf("exp the workspace on the worker %s, it is on %s", sw.Worker, n)
		}
		res, err := c.Exec(ctx, "boxed", "default", pclient.ExecRequest{Command: "cd /workspace && cat src/b.txt && echo boxed > boxed.txt"})
		if err != nil || res.ExitCode != 0 || res.Stdout != "b\n" {
			t.Fatalf("exec: %+v %v", res, err)
		}
		cr, err := c.Commit(ctx, "boxed", pclient.CommitRequest{Message: "boxed"})
		if err != nil || !cr.Committed {
			t.Fatalf("commit: %+v %v", cr, err)
		}
		if got := strings.TrimSpace(gitIn(t, repo, "show", "patina/boxed:boxed.txt")); got != "boxed" {
			t.Fatalf("exp the commit on the branch in the repository, got %q", got)
		}
		if err := c.DeleteWorkspace(ctx, "boxed", pclient.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("the Dagger workspace functions' glue on the cluster", func(t *testing.T) {
		// The module's workspace functions are internal/daggerws over the
		// HTTP API (tests/dagger_test.go runs them on a Dagger engine): the
		// same calls against the swarm sidecar, on a repository workspace.
		if _, err := daggerws.Create(ctx, h.Client, daggerws.CreateRequest{Name: "glued", Repo: repo}); err != nil {
			t.Fatalf("create: %v", err)
		}
		out, err := daggerws.Exec(ctx, h.Client, daggerws.ExecRequest{Workspace: "glued", Command: "cd /workspace && echo glued > glued.txt && cat src/b.txt"})
		if err != nil || out != "b\n" {
			t.Fatalf("exec: %q %v", out, err)
		}
		if d, err := daggerws.Diff(ctx, h.Client, daggerws.DiffRequest{Workspace: "glued"}); err != nil || !strings.Contains(d, "+glued") {
			t.Fatalf("diff: %q %v", d, err)
		}
		if _, err := daggerws.Commit(ctx, h.Client, daggerws.CommitRequest{Workspace: "glued", Message: "glued"}); err != nil {
			t.Fatalf("commit: %v", err)
		}
		if _, err := daggerws.Merge(ctx, h.Client, daggerws.MergeRequest{Workspace: "glued"}); err != nil {
			t.Fatalf("merge: %v", err)
		}
		if got := strings.TrimSpace(gitIn(t, repo, "show", "HEAD:glued.txt")); got != "glued" {
			t.Fatalf("exp the merged file in the repository, got %q", got)
		}
		dest := filepath.Join(t.TempDir(), "fetched")
		if res, err := daggerws.Fetch(ctx, h.Client, daggerws.FetchRequest{Workspace: "glued", Dest: dest}); err != nil || res.Files == 0 {
			t.Fatalf("fetch: %+v %v", res, err)
		}
		if b, err := os.ReadFile(filepath.Join(dest, "glued.txt")); err != nil || string(b) != "glued\n" {
			t.Fatalf("fetched file: %q %v", b, err)
		}
		if _, err := daggerws.Delete(ctx, h.Client, daggerws.DeleteRequest{Workspace: "glued"}); err != nil {
			t.Fatalf("delete: %v", err)
		}
	})

	t.Run("refused on a cluster", func(t *testing.T) {
		_, err := h.Client.ForkWorkspace(ctx, "far", pclient.ForkWorkspaceRequest{Name: "far2"})
		if !IsCode(err, pclient.CodeInvalid) || !strings.Contains(err.Error(), "swarm") {
			t.Fatalf("exp 400 for a fork on the swarm, got %v", err)
		}
		for _, bad := range []string{"node.role==worker; rm -rf /", "rm", "node.labels.x=~y", strings.Repeat("x", 300)} {
			_, err := h.Client.CreateWorkspace(ctx, pclient.CreateWorkspaceRequest{Name: "bad", Placement: []string{bad}})
			if !IsCode(err, pclient.CodeInvalid) {
				t.Fatalf("placement %q: exp 400, got %v", bad, err)
			}
		}
	})

	// A create the swarm cannot run fails within seconds, 503 naming the
	// cause, and leaves no service, secret, network or record behind.
	t.Run("unplaceable creates fail at once and leave nothing", func(t *testing.T) {
		owned := func() (n int) {
			f := filters.NewArgs(filters.Arg("label", "dev.patina.state-dir="+h.StateDir))
			svcs, _ := dc.ServiceList(ctx, swarm.ServiceListOptions{Filters: f})
			secs, _ := dc.SecretList(ctx, swarm.SecretListOptions{Filters: f})
			nets, _ := dc.NetworkList(ctx, network.ListOptions{Filters: f})
			return len(svcs) + len(secs) + len(nets)
		}
		before, volumesBefore := owned(), workerVolumes()
		// The workspace's image on the manager only: the worker rejects
		// the task ("No such image"), and Swarm would retry it forever.
		build := exec.Command("docker", "build", "-q", "-t", "patina/only-on-manager:e2e", "-")
		build.Stdin = strings.NewReader("FROM patina/base:bookworm\nLABEL dev.patina.test=only-on-manager-" + fmt.Sprint(time.Now().UnixNano()) + "\n")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("docker build: %v\n%s", err, out)
		}
		t.Cleanup(func() {
			_, _ = dc.ImageRemove(context.Background(), "patina/only-on-manager:e2e", image.RemoveOptions{})
		})
		for _, c := range []struct {
			req  pclient.CreateWorkspaceRequest
			says string
		}{
			{pclient.CreateWorkspaceRequest{Name: "nowhere", Placement: []string{"node.labels.gpu==1"}}, "no node can take it"},
			{pclient.CreateWorkspaceRequest{Name: "noimage", Image: "patina/only-on-manager:e2e", Placement: onWorker}, "does not have the workspace's image"},
		} {
			start := time.Now()
			_, err := h.Client.CreateWorkspace(ctx, c.req)
			took := time.Since(start)
			if !IsCode(err, pclient.CodeUnavailable) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("%s: exp 503 saying %q, got %v", c.req.Name, c.says, err)
			}
			t.Logf("%s: refused in %s: %v", c.req.Name, took.Round(time.Millisecond), err)
			if took > 30*time.Second {
				t.Fatalf("%s: refused only after %s", c.req.Name, took)
			}
			if _, err := h.Client.GetWorkspace(ctx, c.req.Name); !IsCode(err, pclient.CodeNotFound) {
				t.Fatalf("%s: exp no workspace left, got %v", c.req.Name, err)
			}
			WaitFor(t, "nothing of "+c.req.Name+" to be left on the swarm", 15*time.Second, func() bool {
				return owned() == before && workerVolumes() == volumesBefore
			})
		}
	})

	// A sidecar killed in the middle of a create leaves the workspace's
	// secret and network: the next start removes them.
	t.Run("what a create cut short left is swept at the next start", func(t *testing.T) {
		ws := fmt.Sprintf("%016x", time.Now().UnixNano())
		labels := map[string]string{"dev.patina.managed": "1", "dev.patina.workspace": ws, "dev.patina.state-dir": h.StateDir}
		h.Kill9()
		sec, err := dc.SecretCreate(ctx, swarm.SecretSpec{Annotations: swarm.Annotations{Name: "patina-ws-" + ws + "-leftover", Labels: labels}, Data: []byte("x")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dc.NetworkCreate(ctx, "patina-ws-"+ws, network.CreateOptions{Driver: "overlay", Attachable: true, Labels: labels}); err != nil {
			t.Fatal(err)
		}
		h.Launch()
		if _, _, err := dc.SecretInspectWithRaw(ctx, sec.ID); err == nil {
			t.Fatal("the leftover secret outlived the next start")
		}
		WaitFor(t, "the leftover network to go", 15*time.Second, func() bool { return !networkExists(ctx, dc, "patina-ws-"+ws) })
		// The workspaces that exist are untouched.
		if _, err := h.Client.GetWorkspace(ctx, "far"); err != nil {
			t.Fatal(err)
		}
		h.Out("far", "default", "true")
	})

	t.Run("delete leaves nothing on the manager or the worker", func(t *testing.T) {
		ws, err := h.Client.GetWorkspace(ctx, "far")
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Client.DeleteWorkspace(ctx, "far", pclient.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := dc.ServiceInspectWithRaw(ctx, ws.ContainerID, swarm.ServiceInspectOptions{}); err == nil {
			t.Fatal("the service outlived its workspace")
		}
		secrets, _ := dc.SecretList(ctx, swarm.SecretListOptions{Filters: filters.NewArgs(filters.Arg("label", "dev.patina.workspace="+ws.ID))})
		if len(secrets) != 0 {
			t.Fatalf("the workspace's secrets outlived it: %v", secrets)
		}
		// Removed from the cluster at once; its load-balancer endpoint on
		// this node goes a moment later.
		WaitFor(t, "the workspace's network to go", 15*time.Second, func() bool {
			return !networkExists(ctx, dc, "patina-ws-"+ws.ID)
		})
		// Its volumes on the worker go too (a one-shot task there).
		vs, err := e.Client(t).VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(filters.Arg("label", "dev.patina.workspace="+ws.ID))})
		if err != nil || len(vs.Volumes) != 0 {
			t.Fatalf("exp the workspace's volumes gone from the worker, got %d (%v)", len(vs.Volumes), err)
		}
	})
}

// kernelLacksESP reports whether this kernel's configuration says it has
// no IPsec ESP (and no esp4 module is loaded).
func kernelLacksESP() bool {
	if _, err := os.Stat("/sys/module/esp4"); err == nil {
		return false
	}
	f, err := os.Open("/proc/config.gz")
	if err != nil {
		return false
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return false
	}
	b, err := io.ReadAll(io.LimitReader(zr, 16<<20))
	return err == nil && strings.Contains(string(b), "\n# CONFIG_INET_ESP is not set\n")
}

// bigRepo is a repository of about size bytes of incompressible files (1
// MiB each), in one commit.
func bigRepo(t *testing.T, size int) string {
	t.Helper()
	dir := GitRepo(t, map[string]string{"README": "big\n"})
	buf := make([]byte, 1<<20)
	for i := 0; i < size>>20; i++ {
		if _, err := crand.Read(buf); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("blob-%03d", i)), buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitIn(t, dir, "add", "-A")
	gitIn(t, dir, "commit", "-q", "-m", "big")
	return dir
}
