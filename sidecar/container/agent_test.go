package container

import (
	"archive/tar"
	"bytes"
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/patina-dev/patina/sidecar/agent/wire"
	"github.com/patina-dev/patina/sidecar/image"
)

// distinctEngine is testEngine(t, "") shipping a copy of the test agent with
// random bytes appended: its agent volume is its own (named after its
// hash), made by no other test, and removed at the end. wrap, if not nil,
// wraps the client.
func distinctEngine(t *testing.T, wrap func(*client.Client) API) (*Docker, *client.Client) {
	t.Helper()
	d0, cli := testEngine(t, "")
	b, err := os.ReadFile(d0.cfg.Binary)
	if err != nil {
		t.Fatal(err)
	}
	tail := make([]byte, 32)
	_, _ = crand.Read(tail)
	cfg := d0.cfg
	cfg.Binary = filepath.Join(t.TempDir(), "agentbin")
	if err := os.WriteFile(cfg.Binary, append(b, tail...), 0o755); err != nil {
		t.Fatal(err)
	}
	var api API = cli
	if wrap != nil {
		api = wrap(cli)
	}
	d, err := New(api, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// This runs before engine's own cleanup (last in, first out):
		// what uses the volume goes first.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = Cleanup(ctx, cli, cfg.StateDir)
		if err := cli.VolumeRemove(ctx, d.agent.name, true); err != nil && !errdefs.IsNotFound(err) {
			t.Logf("remove the test's agent volume: %v", err)
		}
	})
	return d, cli
}

// rewriteVolume writes content as the agent volume's file, through a
// container of the test's own, as anyone with the engine's API could.
func rewriteVolume(t *testing.T, cli *client.Client, name string, content []byte) {
	t.Helper()
	ctx := context.Background()
	c, err := cli.ContainerCreate(ctx, &dcontainer.Config{Image: image.DefaultTag, Entrypoint: []string{"/bin/true"}}, &dcontainer.HostConfig{
		Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: name, Target: "/agent"}},
	}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cli.ContainerRemove(ctx, c.ID, dcontainer.RemoveOptions{Force: true})
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "patina", Mode: 0o755, Size: int64(len(content)), Typeflag: tar.TypeReg})
	_, _ = tw.Write(content)
	_ = tw.Close()
	if err := cli.CopyToContainer(ctx, c.ID, "/agent", &buf, dcontainer.CopyToContainerOptions{}); err != nil {
		t.Fatal(err)
	}
}

// volumeSum is the sha256 of the agent volume's file, as the engine reads it.
func volumeSum(t *testing.T, d *Docker) [sha256.Size]byte {
	t.Helper()
	ctx := context.Background()
	img, err := d.fillImage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.api.ContainerCreate(ctx, &dcontainer.Config{Image: img, Entrypoint: []string{"/nonexistent"}}, &dcontainer.HostConfig{
		Mounts: []mount.Mount{agentMount(d.agent.name, "/agent", true)},
	}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer d.api.ContainerRemove(ctx, c.ID, dcontainer.RemoveOptions{Force: true})
	rc, _, err := d.api.CopyFromContainer(ctx, c.ID, "/agent/patina")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	if _, err := tr.Next(); err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	_, _ = io.Copy(h, tr)
	var s [sha256.Size]byte
	copy(s[:], h.Sum(nil))
	return s
}

// The volume's file is rewritten (same size, other bytes): a sidecar that
// has verified it does not look again (a new process does), and the new
// one fills it again before any workspace starts on it.
func TestAgentVolumeRewrittenIsFilledAgain(t *testing.T) {
	d, cli := distinctEngine(t, nil)
	ctx := context.Background()
	if _, err := d.agent.ensure(ctx, d); err != nil {
		t.Fatal(err)
	}
	if got := volumeSum(t, d); got != d.agent.sum {
		t.Fatal("the filled volume does not hold the binary")
	}
	other := bytes.Repeat([]byte{'#'}, int(d.agent.size))
	rewriteVolume(t, cli, d.agent.name, other)
	if got := volumeSum(t, d); got != sha256.Sum256(other) {
		t.Fatal("the rewrite did not take: the test tested nothing")
	}
	// A new process: the first use checks.
	d2, err := New(cli, d.cfg)
	if err != nil {
		t.Fatal(err)
	}
	cid, err := d2.Create(ctx, spec("trewrite"))
	if err != nil {
		t.Fatal(err)
	}
	if got := volumeSum(t, d); got != d.agent.sum {
		t.Fatal("the volume was not filled again before the workspace started")
	}
	c := agentClient(d2, cid, "trewrite", "tok")
	defer c.Close()
	res, err := c.Exec(ctx, wire.ExecRequest{Session: "default", Command: "echo ok", Ensure: true}, nil)
	if err != nil || string(res.Stdout.Data) != "ok\n" {
		t.Fatalf("the agent of the refilled volume: %+v %v", res, err)
	}
}

// corruptingAPI writes other bytes than it is given into containers, as a
// fill that does not take would.
type corruptingAPI struct{ *client.Client }

func (c corruptingAPI) CopyToContainer(ctx context.Context, id, dst string, r io.Reader, opts dcontainer.CopyToContainerOptions) error {
	var out bytes.Buffer
	tr, tw := tar.NewReader(r), tar.NewWriter(&out)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(tr)
		if len(body) > 0 {
			body[len(body)/2] ^= 1
		}
		_ = tw.WriteHeader(hdr)
		_, _ = tw.Write(body)
	}
	_ = tw.Close()
	return c.Client.CopyToContainer(ctx, id, dst, &out, opts)
}

// A volume that still does not hold the binary after it was filled is
// refused with a clear error (ErrAgentBinary), and no workspace container
// is made on it.
func TestAgentVolumeRefusedWhenTheFillDoesNotTake(t *testing.T) {
	d, cli := distinctEngine(t, func(c *client.Client) API { return corruptingAPI{c} })
	ctx := context.Background()
	_, err := d.Create(ctx, spec("trefused"))
	if !errors.Is(err, ErrAgentBinary) || !strings.Contains(err.Error(), d.agent.name) {
		t.Fatalf("exp ErrAgentBinary naming the volume, got %v", err)
	}
	if _, err := cli.ContainerInspect(ctx, ContainerName("trefused")); !errdefs.IsNotFound(err) {
		t.Fatalf("exp no workspace container on a refused volume, got %v", err)
	}
	if err := d.StartAgent(ctx, "anything", AgentStart{WorkspaceID: "trefused"}); !errors.Is(err, ErrAgentBinary) {
		t.Fatalf("exp an agent start on a refused volume refused too, got %v", err)
	}
}

// A volume of the agent's name that patina did not make (another driver's,
// or a local one bound to a host directory others may write) is refused,
// never filled or used.
func TestAgentVolumeOfAnotherMakeIsRefused(t *testing.T) {
	d, cli := distinctEngine(t, nil)
	ctx := context.Background()
	if _, err := cli.VolumeCreate(ctx, volume.CreateOptions{Name: d.agent.name, Driver: "local",
		DriverOpts: map[string]string{"type": "tmpfs", "device": "tmpfs", "o": "size=64m"}}); err != nil {
		t.Fatal(err)
	}
	_, err := d.agent.ensure(ctx, d)
	if !errors.Is(err, ErrAgentBinary) || !strings.Contains(err.Error(), "docker volume rm "+d.agent.name) {
		t.Fatalf("exp ErrAgentBinary saying how to clear it, got %v", err)
	}
}

// BenchmarkAgentVolume measures what the agent volume's checks cost for a
// binary of 25 MB (patina's is about 23 MB): "check" is what a sidecar
// process pays once before it first uses the volume (the engine's tar of
// the file, read and hashed), "fill" a fill and the check after it.
func BenchmarkAgentVolume(b *testing.B) {
	if testing.Short() {
		b.Skip("needs Docker (skipped with -short)")
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	bin := filepath.Join(b.TempDir(), "bin")
	content := make([]byte, 25<<20)
	_, _ = crand.Read(content)
	if err := os.WriteFile(bin, content, 0o755); err != nil {
		b.Fatal(err)
	}
	d, err := New(cli, Config{StateDir: b.TempDir(), Binary: bin})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	defer cli.VolumeRemove(ctx, d.agent.name, true)
	if _, err := d.agent.ensure(ctx, d); err != nil {
		b.Fatal(err)
	}
	img, err := d.fillImage(ctx)
	if err != nil {
		b.Fatal(err)
	}
	c, err := cli.ContainerCreate(ctx, &dcontainer.Config{Image: img, Entrypoint: []string{"/nonexistent"}}, &dcontainer.HostConfig{
		Mounts: []mount.Mount{agentMount(d.agent.name, agentFillDir, false)},
	}, nil, nil, "")
	if err != nil {
		b.Fatal(err)
	}
	defer cli.ContainerRemove(ctx, c.ID, dcontainer.RemoveOptions{Force: true})
	b.Run("check", func(b *testing.B) {
		b.SetBytes(d.agent.size)
		for i := 0; i < b.N; i++ {
			if err := d.agent.check(ctx, d, c.ID); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fill", func(b *testing.B) {
		b.SetBytes(d.agent.size)
		for i := 0; i < b.N; i++ {
			if err := d.agent.fill(ctx, d, c.ID); err != nil {
				b.Fatal(err)
			}
			if err := d.agent.check(ctx, d, c.ID); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A stopped container made by another binary mounts that binary's agent
// volume (Docker cannot change a container's mounts): starting it says so.
func TestForeignAgentVolumeNoted(t *testing.T) {
	d1, cli := distinctEngine(t, nil)
	ctx := context.Background()
	cid, err := d1.Create(ctx, spec("tforeign"))
	if err != nil {
		t.Fatal(err)
	}
	if err := d1.Stop(ctx, cid, time.Second); err != nil {
		t.Fatal(err)
	}
	d2, _ := distinctEngine(t, nil)
	var logs syncBuffer
	cfg := d2.cfg
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	d3, err := New(cli, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := d3.Start(ctx, cid); err != nil {
		t.Fatal(err)
	}
	if got := logs.String(); !strings.Contains(got, "made by another patina binary") || !strings.Contains(got, d1.agent.name) {
		t.Fatalf("exp a note naming the other binary's volume, got %q", got)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
