package container

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/patina-dev/patina/sidecar/agent"
	"github.com/patina-dev/patina/sidecar/image"
)

// engine returns a Docker engine shipping a minimal agent binary built
// from testdata, or fails when Docker is missing (skips under -short).
func engine(t *testing.T, transport string) (*Docker, *client.Client) {
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
			d, _ := engine(t, transport)
			ctx := context.Background()
			id := "t" + strings.ReplaceAll(transport, "n", "") + "1"
			cid, err := d.Create(ctx, spec(id))
			if err != nil {
				t.Fatal(err)
			}
			c := agentClient(d, cid, id, "secret")
			defer c.Close()
			res, err := c.Exec(ctx, agent.ExecRequest{Session: "default", Command: "echo $PATINA_WORKSPACE; pwd; id -u; grep CapEff /proc/self/status", Ensure: true}, nil)
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
			res, _ = c.Exec(ctx, agent.ExecRequest{Session: "default", Command: "env | grep -c PATINA_AGENT_TOKEN; mknod /tmp/dev b 8 0; echo mknod=$?; touch /.patina/bin/x; echo ro=$?"}, nil)
			if got := string(res.Stdout.Data); got != "0\nmknod=1\nro=1\n" {
				t.Fatalf("exp no token, no mknod, a read-only binary: %q", got)
			}
		})
	}
}

// The agent is killed from inside (kill -9 -1): the client recovers it
// and the shell that ran the kill survives, its session intact.
func TestAgentKilledFromInside(t *testing.T) {
	d, _ := engine(t, "")
	ctx := context.Background()
	cid, err := d.Create(ctx, spec("tkill"))
	if err != nil {
		t.Fatal(err)
	}
	c := agentClient(d, cid, "tkill", "tok")
	defer c.Close()
	if _, err := c.Exec(ctx, agent.ExecRequest{Session: "default", Command: "export KEEP=1; cd /tmp", Ensure: true}, nil); err != nil {
		t.Fatal(err)
	}
	h1, _ := c.Connect(ctx)
	res, err := c.Exec(ctx, agent.ExecRequest{Session: "default", Command: "kill -9 -1; sleep 0.5; echo after"}, nil)
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
	res, err = c.Exec(ctx, agent.ExecRequest{Session: "default", Command: "echo $KEEP $PWD"}, nil)
	if err != nil || string(res.Stdout.Data) != "1 /tmp\n" {
		t.Fatalf("the session after the agent's restart: %+v %v", res, err)
	}
}

func TestSeal(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	dir := t.TempDir()
	if err := Seal(dir); err != nil {
		if testing.Short() && errors.Is(err, ErrCannotSeal) {
			t.Skipf("mounting is not permitted here (no CAP_SYS_ADMIN): %v", err)
		}
		t.Fatal(err)
	}
	defer Unseal(dir)
	if !Sealed(dir) {
		t.Fatal("not sealed after Seal")
	}
	if err := Seal(dir); err != nil {
		t.Fatalf("seal twice: %v", err)
	}
	if err := Unseal(dir); err != nil || Sealed(dir) {
		t.Fatalf("unseal: %v", err)
	}
}

func TestUnescapeMountinfo(t *testing.T) {
	for in, want := range map[string]string{`/a\040b`: "/a b", `/plain`: "/plain", `/x\134y`: `/x\y`, `/bad\04`: `/bad\04`} {
		if got := unescapeMountinfo(in); got != want {
			t.Fatalf("%q: exp %q, got %q", in, want, got)
		}
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
	d0, cli := engine(t, "")
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
	if _, err := d.agent.ensure(ctx, d, image.DefaultTag); err != nil {
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
	res, err := c.Exec(ctx, agent.ExecRequest{Session: "default", Command: "echo ok", Ensure: true}, nil)
	if err != nil || string(res.Stdout.Data) != "ok\n" {
		t.Fatalf("exec: %+v %v", res, err)
	}
	if _, err := cli.VolumeInspect(ctx, other); err != nil {
		t.Fatalf("a fresh volume of another binary was pruned: %v", err)
	}
}
