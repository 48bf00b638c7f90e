package container

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/patina-dev/patina/sidecar/agent"
	"github.com/patina-dev/patina/sidecar/agent/wire"
	"github.com/patina-dev/patina/sidecar/image"
)

// testEngine returns a Docker engine shipping a minimal agent binary built
// from testdata, or fails when Docker is missing (skips under -short).
func testEngine(t *testing.T, transport string) (*Docker, *client.Client) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Docker (skipped with -short)")
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		t.Fatalf("these tests need a running Docker engine (start dockerd; .ci/run does): %v", err)
	}
	if err := image.EnsureBuilt(ctx, nil, os.Stderr); err != nil {
		t.Fatalf("the default workspace image is missing and could not be built: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "agentbin")
	build := exec.Command("go", "build", "-o", bin, "./testdata/agentbin")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the test agent: %v\n%s", err, out)
	}
	stateDir := t.TempDir()
	d, err := New(cli, Config{StateDir: stateDir, Binary: bin, Transport: transport, Network: "patina-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = Cleanup(ctx, cli, stateDir)
	})
	return d, cli
}

func spec(id string) Spec {
	return Spec{WorkspaceID: id, Name: id, Image: image.DefaultTag, MemoryMB: 512, CPUs: 1, PidsLimit: 512, Network: "bridge"}
}

// client connects an agent client to a container through d.
func agentClient(d *Docker, cid, wsid, token string) *agent.Client {
	return agent.NewClient(agent.ClientConfig{
		WorkspaceID: wsid, Token: token,
		Dial: func(ctx context.Context) (net.Conn, error) { return d.DialAgent(ctx, cid) },
		Recover: func(ctx context.Context, cause error) error {
			return d.StartAgent(ctx, cid, AgentStart{WorkspaceID: wsid, Token: token})
		},
	})
}

func TestAgentInContainer(t *testing.T) {
	for _, transport := range []string{"netns", "exec"} {
		t.Run(transport, func(t *testing.T) {
			d, _ := testEngine(t, transport)
			ctx := context.Background()
			id := "t" + strings.ReplaceAll(transport, "n", "") + "1"
			cid, err := d.Create(ctx, spec(id))
			if err != nil {
				t.Fatal(err)
			}
			c := agentClient(d, cid, id, "secret")
			defer c.Close()
			res, err := c.Exec(ctx, wire.ExecRequest{Session: "default", Command: "echo $PATINA_WORKSPACE; pwd; id -u; grep CapEff /proc/self/status", Ensure: true}, nil)
			if err != nil {
				t.Fatal(err)
			}
			out := string(res.Stdout.Data)
			if !strings.HasPrefix(out, id+"\n/workspace\n0\n") {
				t.Fatalf("exec in the container: %q", out)
			}
			// CHOWN DAC_OVERRIDE FOWNER KILL SETGID SETUID NET_BIND_SERVICE.
			if !strings.Contains(out, "CapEff:\t00000000000004eb") {
				t.Fatalf("exp only the kept capabilities, got %q", out)
			}
			// The agent's token is not in the shells' environment.
			res, _ = c.Exec(ctx, wire.ExecRequest{Session: "default", Command: "env | grep -c PATINA_AGENT_TOKEN; mknod /tmp/dev b 8 0; echo mknod=$?; touch /.patina/bin/x; echo ro=$?"}, nil)
			if got := string(res.Stdout.Data); got != "0\nmknod=1\nro=1\n" {
				t.Fatalf("exp no token, no mknod, a read-only binary: %q", got)
			}
		})
	}
}

// The agent is killed from inside (kill -9 -1): the client recovers it
// and the shell that ran the kill survives, its session intact.
func TestAgentKilledFromInside(t *testing.T) {
	d, _ := testEngine(t, "")
	ctx := context.Background()
	cid, err := d.Create(ctx, spec("tkill"))
	if err != nil {
		t.Fatal(err)
	}
	c := agentClient(d, cid, "tkill", "tok")
	defer c.Close()
	if _, err := c.Exec(ctx, wire.ExecRequest{Session: "default", Command: "export KEEP=1; cd /tmp", Ensure: true}, nil); err != nil {
		t.Fatal(err)
	}
	h1, _ := c.Connect(ctx)
	res, err := c.Exec(ctx, wire.ExecRequest{Session: "default", Command: "kill -9 -1; sleep 0.5; echo after"}, nil)
	if err != nil {
		t.Fatalf("exec across the agent's death: %v", err)
	}
	if string(res.Stdout.Data) != "after\n" {
		t.Fatalf("exp the command to finish, got %+v", res)
	}
	h2, err := c.Connect(ctx)
	if err != nil || h2.PID == h1.PID {
		t.Fatalf("exp a new agent, got %+v %v", h2, err)
	}
	res, err = c.Exec(ctx, wire.ExecRequest{Session: "default", Command: "echo $KEEP $PWD"}, nil)
	if err != nil || string(res.Stdout.Data) != "1 /tmp\n" {
		t.Fatalf("the session after the agent's restart: %+v %v", res, err)
	}
}

// pruningAPI removes the agent volume just before the first workspace
// container is created, as another sidecar's prune could.
type pruningAPI struct {
	*client.Client
	volume string
	done   bool
}

func (p *pruningAPI) ContainerCreate(ctx context.Context, cfg *dcontainer.Config, host *dcontainer.HostConfig, nw *network.NetworkingConfig, pl *ocispec.Platform, name string) (dcontainer.CreateResponse, error) {
	if !p.done && name != "" {
		p.done = true
		if err := p.Client.VolumeRemove(ctx, p.volume, true); err != nil {
			return dcontainer.CreateResponse{}, err
		}
	}
	return p.Client.ContainerCreate(ctx, cfg, host, nw, pl, name)
}

// The agent volume vanishes between its check and the container's
// creation (Docker then makes it anew, empty): Create fills it again and
// the workspace starts. Another binary's volume made a moment ago is not
// pruned.
func TestAgentVolumeRemovedBehindOurBack(t *testing.T) {
	d0, cli := testEngine(t, "")
	ctx := context.Background()
	other := "patina-agent-0000000000000000"
	if _, err := cli.VolumeCreate(ctx, volume.CreateOptions{Name: other, Labels: map[string]string{LabelManaged: "1", LabelRole: "agent"}}); err != nil {
		t.Fatal(err)
	}
	defer cli.VolumeRemove(context.Background(), other, true)
	api := &pruningAPI{Client: cli, volume: d0.agent.name}
	d, err := New(api, d0.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.agent.ensure(ctx, d); err != nil {
		t.Fatal(err)
	}
	cid, err := d.Create(ctx, spec("tpruned"))
	if err != nil {
		t.Fatalf("create after the agent volume went: %v", err)
	}
	if !api.done {
		t.Fatal("the volume was never removed: the test tested nothing")
	}
	c := agentClient(d, cid, "tpruned", "tok")
	defer c.Close()
	res, err := c.Exec(ctx, wire.ExecRequest{Session: "default", Command: "echo ok", Ensure: true}, nil)
	if err != nil || string(res.Stdout.Data) != "ok\n" {
		t.Fatalf("exec: %+v %v", res, err)
	}
	if _, err := cli.VolumeInspect(ctx, other); err != nil {
		t.Fatalf("a fresh volume of another binary was pruned: %v", err)
	}
}

// Before API 1.44 an engine does not keep network names unique: two
// sidecars (or test processes) creating patina's network at once can make
// two, after which the name is ambiguous ("2 matches found based on
// name"). Every caller must still find one, and an unused duplicate is
// cleared once it is old enough that no racing caller can have just
// picked it.
func TestDuplicateNetworks(t *testing.T) {
	d, cli := testEngine(t, "")
	ctx := context.Background()
	name := fmt.Sprintf("patina-dup-%d", time.Now().UnixNano())
	named := func(name string) []string {
		list, err := networksNamed(context.Background(), cli, name)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, n := range list {
			ids = append(ids, n.ID)
		}
		return ids
	}
	removeNamed := func(name string) {
		for _, id := range named(name) {
			_ = cli.NetworkRemove(context.Background(), id)
		}
	}
	t.Cleanup(func() { removeNamed(name) })
	// Two of one name, made as an engine that checks nothing would.
	var ids []string
	for range 2 {
		body := fmt.Sprintf(`{"Name":%q,"CheckDuplicate":false,"Driver":"bridge","Labels":{%q:"1"},"Options":{"com.docker.network.bridge.enable_icc":"false"}}`, name, LabelManaged)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://docker/v1.41/networks/create", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := cli.HTTPClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out struct{ ID string }
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusCreated || out.ID == "" {
			t.Fatalf("make a duplicate network: %d %v %+v", resp.StatusCode, err, out)
		}
		ids = append(ids, out.ID)
		time.Sleep(20 * time.Millisecond) // distinct creation times
	}
	if _, err := cli.NetworkInspect(ctx, name, network.InspectOptions{}); err == nil {
		t.Fatal("exp the name to be ambiguous to the engine; it is not, so this test shows nothing")
	}
	d.cfg.Network = name
	got, err := d.ensureNetwork(ctx)
	if err != nil || got != ids[0] {
		t.Fatalf("exp the oldest network %s, got %q %v", short(ids[0]), got, err)
	}
	if left := named(name); len(left) != 2 {
		t.Fatalf("a duplicate younger than a minute (one a racing caller may have just picked) was removed: %v", left)
	}
	// A container on the duplicate keeps it.
	ctr, err := cli.ContainerCreate(ctx, &dcontainer.Config{Image: image.DefaultTag, Cmd: []string{"true"}, Labels: map[string]string{LabelManaged: "1", LabelStateDir: d.cfg.StateDir}},
		&dcontainer.HostConfig{NetworkMode: dcontainer.NetworkMode(ids[1])}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	d.dupNetworkAge = 0
	if got, err := d.ensureNetwork(ctx); err != nil || got != ids[0] {
		t.Fatalf("exp %s again, got %q %v", short(ids[0]), got, err)
	}
	if left := named(name); len(left) != 2 {
		t.Fatalf("a duplicate with a (stopped) container on it was removed: %v", left)
	}
	if err := cli.ContainerRemove(ctx, ctr.ID, dcontainer.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if got, err := d.ensureNetwork(ctx); err != nil || got != ids[0] {
		t.Fatalf("exp %s again, got %q %v", short(ids[0]), got, err)
	}
	if left := named(name); !slices.Equal(left, ids[:1]) {
		t.Fatalf("exp only %s left, got %v", short(ids[0]), left)
	}

	// Many callers at once, from nothing: each gets a network of the
	// name; a later call leaves exactly one.
	name2 := name + "-race"
	t.Cleanup(func() { removeNamed(name2) })
	const n = 6
	got2 := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			e, err := New(cli, Config{StateDir: t.TempDir(), Binary: d.cfg.Binary, Network: name2})
			if err == nil {
				got2[i], errs[i] = e.ensureNetwork(ctx)
			} else {
				errs[i] = err
			}
		})
	}
	wg.Wait()
	made := named(name2)
	for i := range n {
		if errs[i] != nil || !slices.Contains(made, got2[i]) {
			t.Fatalf("caller %d: %q %v (networks: %v)", i, got2[i], errs[i], made)
		}
	}
	d.cfg.Network = name2
	final, err := d.ensureNetwork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if left := named(name2); !slices.Equal(left, []string{final}) {
		t.Fatalf("exp one network %s left, got %v (made %d)", short(final), left, len(made))
	}
	t.Logf("%d callers at once made %d network(s) of one name", n, len(made))
}

// A container whose spec names its agent gets it from its init (agent
// pause --once): StartAgent at boot adds none, the agent answers, and its
// token stays out of the shells. Once that agent is gone, the init does not
// start another (the sidecar's StartAgent does, alone).
func TestAgentStartedByInit(t *testing.T) {
	d, cli := testEngine(t, "")
	ctx := context.Background()
	const id, token = "tinit", "init-token"
	sp := spec(id)
	sp.Agent = AgentStart{WorkspaceID: id, Token: token}
	cid, err := d.Create(ctx, sp)
	if err != nil {
		t.Fatal(err)
	}
	ci, err := cli.ContainerInspect(ctx, cid)
	if err != nil || ci.Config.Labels[LabelAgentInit] != "1" || ci.Config.User != "0" {
		t.Fatalf("exp the agent-init label and user 0, got %v %v", ci.Config, err)
	}
	if err := d.StartAgent(ctx, cid, AgentStart{WorkspaceID: id, Token: token, Takeover: true, Boot: true}); err != nil {
		t.Fatal(err)
	}
	c := agentClient(d, cid, id, token)
	defer c.Close()
	h1, err := c.ConnectWait(ctx, 15*time.Second)
	if err != nil {
		t.Fatalf("the init's agent did not answer: %v", err)
	}
	res, err := c.Exec(ctx, wire.ExecRequest{Session: "default", Command: "env | grep -c PATINA_AGENT_TOKEN", Ensure: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res.Stdout.Data); !strings.HasPrefix(got, "0\n") {
		t.Fatalf("exp no token in the shell's environment: %q", got)
	}
	// No docker exec started it: its parent is PID 1.
	out, err := exec.CommandContext(ctx, "docker", "exec", cid, "sh", "-c", fmt.Sprintf("grep PPid /proc/%d/status", h1.PID)).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "PPid:\t1\n") {
		t.Fatalf("exp the agent to be the init's child: %q %v", out, err)
	}
	c.Close()
	if out, err := exec.CommandContext(ctx, "docker", "exec", cid, "kill", "-9", fmt.Sprint(h1.PID)).CombinedOutput(); err != nil {
		t.Fatalf("kill the agent: %v %s", err, out)
	}
	// pause --once leaves it dead (its restart delay would be 5 s; wait
	// 6 s).
	time.Sleep(6 * time.Second)
	dctx, dcancel := context.WithTimeout(ctx, 2*time.Second)
	if conn, err := d.DialAgent(dctx, cid); err == nil {
		conn.Close()
		dcancel()
		t.Fatal("an agent answers after the init's agent was killed: the init started another")
	}
	dcancel()
	c2 := agentClient(d, cid, id, token)
	defer c2.Close()
	if err := d.StartAgent(ctx, cid, AgentStart{WorkspaceID: id, Token: token, Takeover: true}); err != nil {
		t.Fatal(err)
	}
	h2, err := c2.ConnectWait(ctx, 15*time.Second)
	if err != nil || h2.PID == h1.PID {
		t.Fatalf("exp a new agent from StartAgent: %+v %v", h2, err)
	}
	c2.Close()
	// At a boot with other flags than the init's (another git identity),
	// StartAgent starts an agent with the new ones, which takes over.
	if err := d.StartAgent(ctx, cid, AgentStart{WorkspaceID: id, Token: token, Takeover: true, Boot: true, Args: []string{"--git-name", "other"}}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		c3 := agentClient(d, cid, id, token)
		h3, err := c3.ConnectWait(ctx, time.Second)
		c3.Close()
		if err == nil && h3.PID != h2.PID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("exp an agent with the new flags to take over from %d: %+v %v", h2.PID, h3, err)
		}
	}
}
