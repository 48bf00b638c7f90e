package tests

// Hostile tests of the agent's binary: an image, a fork or a rewritten
// volume tries to become the agent (the init and `agent serve`) of
// workspaces, its own and later ones. The agent must always be the
// sidecar's own binary, byte for byte.

import (
	"archive/tar"
	"bytes"
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/client"

	pclient "github.com/patina-dev/patina/sidecar/client"
	pimage "github.com/patina-dev/patina/sidecar/image"
)

// hostileMarker is the file the hostile agent leaves in its container
// whenever it runs.
const hostileMarker = "/tmp/patina-hostile-marker"

// distinctBinary copies the patina binary with random bytes appended (an
// ELF file runs the same with a tail): a sidecar running the copy ships it
// into an agent volume of its own (the volume is named after the binary's
// hash), which no other test, nor an earlier run, has made, so that what
// fills it is this test's doing. It returns the copy, its sha256 and the
// volume's name; the volume is removed at the end.
func distinctBinary(t *testing.T, dc *client.Client) (bin, sum, volume string) {
	t.Helper()
	b, err := os.ReadFile(Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	tail := make([]byte, 32)
	_, _ = crand.Read(tail)
	b = append(b, tail...)
	bin = filepath.Join(t.TempDir(), "patina")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	sum = hex.EncodeToString(s[:])
	volume = "patina-agent-" + sum[:16]
	// Registered before the sidecar's own cleanup, so it runs after it,
	// once no container uses the volume.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := dc.VolumeRemove(ctx, volume, true); err != nil && !errdefs.IsNotFound(err) {
			t.Logf("remove the test's agent volume %s: %v", volume, err)
		}
	})
	return bin, sum, volume
}

// hostileScript is a shell script of exactly size bytes (the real
// binary's size, so that a check of sizes passes it) that leaves a mark,
// then runs the real binary kept beside it as "real": the workspace it
// runs in works as usual.
func hostileScript(t *testing.T, size int64) []byte {
	t.Helper()
	head := "#!/bin/sh\n" +
		"echo \"$$ $*\" >> " + hostileMarker + " 2>/dev/null\n" +
		"exec \"$(dirname \"$0\")/real\" \"$@\"\n"
	pad := size - int64(len(head)) - 2
	if pad < 0 {
		t.Fatalf("the binary is too small (%d bytes) for the script", size)
	}
	b := []byte(head + "#" + strings.Repeat("x", int(pad)) + "\n")
	if int64(len(b)) != size {
		t.Fatalf("the script is %d bytes, not %d", len(b), size)
	}
	return b
}

// agentTar is a tar of the directory agent/ holding the hostile script as
// agent/patina and the real binary bin as agent/real (dir "" leaves the
// names bare).
func agentTar(t *testing.T, bin, dir string) io.Reader {
	t.Helper()
	real, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if dir != "" {
		_ = tw.WriteHeader(&tar.Header{Name: dir + "/", Mode: 0o755, Typeflag: tar.TypeDir})
		dir += "/"
	}
	for name, body := range map[string][]byte{"patina": hostileScript(t, int64(len(real))), "real": real} {
		if err := tw.WriteHeader(&tar.Header{Name: dir + name, Mode: 0o755, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf
}

// hostileAgentImage builds, offline, an image from the default one that
// holds /agent/patina (the hostile script) and /agent/real (the real
// binary): an image that tries to become the agent of every workspace, as
// the fill of the agent volume once went through the workspace's image
// with the empty volume at /agent. It is removed at the end.
func hostileAgentImage(t *testing.T, dc *client.Client, bin string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tag := fmt.Sprintf("patina-test/hostile-agent:%d", time.Now().UnixNano())
	c, err := dc.ContainerCreate(ctx, &container.Config{Image: pimage.DefaultTag, Entrypoint: []string{"/bin/true"}}, nil, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer dc.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true})
	if err := dc.CopyToContainer(ctx, c.ID, "/", agentTar(t, bin, "agent"), container.CopyToContainerOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := dc.ContainerCommit(ctx, c.ID, container.CommitOptions{Reference: tag}); err != nil {
		t.Fatal(err)
	}
	// Registered before the sidecar's cleanup: runs after its workspaces
	// are gone.
	t.Cleanup(func() {
		_, _ = dc.ImageRemove(context.Background(), tag, image.RemoveOptions{Force: true, PruneChildren: true})
	})
	return tag
}

// volumeFileSum is the sha256 of the agent volume's file, read through a
// container of the test's own that is never started ("" if there is none).
func volumeFileSum(t *testing.T, dc *client.Client, volume string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := dc.ContainerCreate(ctx, &container.Config{Image: pimage.DefaultTag, Entrypoint: []string{"/bin/true"}}, &container.HostConfig{
		Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: volume, Target: "/agent", ReadOnly: true, VolumeOptions: &mount.VolumeOptions{NoCopy: true}}},
	}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer dc.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true})
	rc, _, err := dc.CopyFromContainer(ctx, c.ID, "/agent/patina")
	if errdefs.IsNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	if _, err := tr.Next(); err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, tr); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// checkRealAgent checks that the hostile agent never ran in workspace ws
// and that its agent's binary is the sidecar's, and (unless others) alone
// in /.patina/bin: nothing of an image was copied there.
func checkRealAgent(t *testing.T, h *Harness, ws, sum string, others ...string) {
	t.Helper()
	exp := "clean\n" + sum + "\n" + strings.Join(append([]string{"patina"}, others...), "\n") + "\n"
	got := h.Out(ws, "default", "test -e "+hostileMarker+" && echo marked || echo clean; sha256sum /.patina/bin/patina | cut -d' ' -f1; ls -A /.patina/bin")
	if got != exp {
		t.Fatalf("workspace %s: exp the sidecar's own agent, never the hostile one (%q), got %q", ws, exp, got)
	}
}

// An image holding /agent/patina (a script the size of the real binary
// that leaves a mark and runs the real one) is the first workspace's of a
// sidecar whose agent volume does not exist yet: neither that workspace
// nor a later default-image one ever runs it; the agent is the sidecar's
// binary, and nothing of the image is in the volume. On this host's engine
// and on a remote one (DOCKER_HOST=tcp://…, the second engine).
func TestHostileImageCannotBecomeTheAgent(t *testing.T) {
	RequireDocker(t)
	t.Run("local engine", func(t *testing.T) { checkHostileImage(t, dockerClient(t), nil) })
	t.Run("remote engine", func(t *testing.T) {
		e := StartSecondEngine(t)
		checkHostileImage(t, e.Client(t), []string{"DOCKER_HOST=" + e.Host})
	})
}

// checkHostileImage runs TestHostileImageCannotBecomeTheAgent on the
// engine of dc, which a sidecar with env reaches.
func checkHostileImage(t *testing.T, dc *client.Client, env []string) {
	bin, sum, volume := distinctBinary(t, dc)
	img := hostileAgentImage(t, dc, bin)
	h := StartBinary(t, bin, t.TempDir(), "e2e-hostile-image", env, nil)
	ctx := context.Background()
	if _, err := dc.VolumeInspect(ctx, volume); !errdefs.IsNotFound(err) {
		t.Fatalf("exp no agent volume %s before the first workspace, got %v", volume, err)
	}
	h.CreateWorkspace(pclient.CreateWorkspaceRequest{Name: "trap", Image: img})
	if got := h.Out("trap", "default", "echo works"); got != "works\n" {
		t.Fatalf("the workspace of the hostile image: %q", got)
	}
	checkRealAgent(t, h, "trap", sum)
	h.CreateWorkspace(pclient.CreateWorkspaceRequest{Name: "plain"})
	checkRealAgent(t, h, "plain", sum)
	if got := volumeFileSum(t, dc, volume); got != sum {
		t.Fatalf("the agent volume holds %s, not the sidecar's binary %s", got, sum)
	}
}

// A workspace plants /agent/patina and /agent/real in its own files and is
// forked (a docker commit of its container: the fork's image carries
// them). The agent volume then goes (removed once nothing uses it) and is
// filled again as the fork's container is made anew from the fork's image:
// the fork's image never supplies the binary, to the fork or to a later
// workspace.
func TestForkCannotBecomeTheAgent(t *testing.T) {
	RequireDocker(t)
	dc := dockerClient(t)
	bin, sum, volume := distinctBinary(t, dc)
	h := StartBinary(t, bin, t.TempDir(), "e2e-hostile-fork", nil, nil)
	ctx := context.Background()
	h.CreateWorkspace(pclient.CreateWorkspaceRequest{Name: "plant"})
	real, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Client.WriteFile(ctx, "plant", "hostile", hostileScript(t, int64(len(real)))); err != nil {
		t.Fatal(err)
	}
	h.Out("plant", "default", "mkdir -p /agent && mv /workspace/hostile /agent/patina && chmod 755 /agent/patina && cp /.patina/bin/patina /agent/real")
	fork, err := h.Client.ForkWorkspace(ctx, "plant", pclient.ForkWorkspaceRequest{Name: "forked"})
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Out("forked", "default", "cmp -s /agent/real /.patina/bin/patina && test -x /agent/patina && echo carried"); got != "carried\n" {
		t.Fatalf("exp the fork's image to carry the planted /agent, got %q", got)
	}
	checkRealAgent(t, h, "forked", sum)
	// Nothing uses the volume any more: it goes, and the fork's start fills
	// it again, its container made anew from its own image.
	if err := h.Client.DeleteWorkspace(ctx, "plant", pclient.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	RemoveContainer(t, fork.ContainerID)
	if err := dc.VolumeRemove(ctx, volume, false); err != nil {
		t.Fatalf("remove the agent volume: %v", err)
	}
	if _, err := h.Client.StartWorkspace(ctx, "forked"); err != nil {
		t.Fatal(err)
	}
	checkRealAgent(t, h, "forked", sum)
	h.CreateWorkspace(pclient.CreateWorkspaceRequest{Name: "after"})
	checkRealAgent(t, h, "after", sum)
	if got := volumeFileSum(t, dc, volume); got != sum {
		t.Fatalf("the agent volume holds %s, not the sidecar's binary %s", got, sum)
	}
}

// The agent volume's file is rewritten behind patina's back (through a
// container the test makes, with a script of the same size, as anyone with
// the engine's API could): the next sidecar process checks the volume
// before it starts a workspace on it, finds it, fills it again, and never
// runs what was written.
func TestTamperedAgentVolumeIsNeverRun(t *testing.T) {
	RequireDocker(t)
	dc := dockerClient(t)
	bin, sum, volume := distinctBinary(t, dc)
	h := StartBinary(t, bin, t.TempDir(), "e2e-hostile-volume", nil, nil)
	ctx := context.Background()
	h.CreateWorkspace(pclient.CreateWorkspaceRequest{Name: "first"})
	checkRealAgent(t, h, "first", sum)
	if _, err := h.Client.StopWorkspace(ctx, "first"); err != nil {
		t.Fatal(err)
	}
	// The rewrite.
	c, err := dc.ContainerCreate(ctx, &container.Config{Image: pimage.DefaultTag, Entrypoint: []string{"/bin/true"}}, &container.HostConfig{
		Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: volume, Target: "/agent"}},
	}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	err = dc.CopyToContainer(ctx, c.ID, "/agent", agentTar(t, bin, ""), container.CopyToContainerOptions{})
	_ = dc.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := volumeFileSum(t, dc, volume); got == sum || got == "" {
		t.Fatalf("the rewrite did not take: the volume holds %q", got)
	}
	h.Kill9()
	h.Launch()
	if _, err := h.Client.StartWorkspace(ctx, "first"); err != nil {
		t.Fatal(err)
	}
	// The binary is written again over the script; the file the rewrite
	// added beside it stays (a volume in use cannot be emptied), and is
	// never run.
	checkRealAgent(t, h, "first", sum, "real")
	h.CreateWorkspace(pclient.CreateWorkspaceRequest{Name: "second"})
	checkRealAgent(t, h, "second", sum, "real")
	if got := volumeFileSum(t, dc, volume); got != sum {
		t.Fatalf("the agent volume holds %s, not the sidecar's binary %s", got, sum)
	}
	if !strings.Contains(h.Logs(), "does not hold this patina binary") {
		t.Fatalf("exp the sidecar to log the volume it found rewritten; logs:\n%s", lastLines(h.Logs(), 30))
	}
}

// serve --agent-binary names the Linux binary the workspaces' agent runs
// (as a sidecar on macOS must): a workspace runs exactly that file, and a
// file that is not a Linux program is refused at start, saying what to
// give instead.
func TestAgentBinaryFlag(t *testing.T) {
	RequireDocker(t)
	dc := dockerClient(t)
	bin, sum, _ := distinctBinary(t, dc)
	h := StartWith(t, t.TempDir(), "e2e-agent-binary", nil, []string{"--agent-binary", bin})
	h.CreateWorkspace(pclient.CreateWorkspaceRequest{Name: "named"})
	checkRealAgent(t, h, "named", sum)

	script := filepath.Join(t.TempDir(), "patina-linux-arm64")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, Binary(t), "serve", "--addr", "127.0.0.1:0", "--state-dir", t.TempDir(), "--token", "x", "--agent-binary", script).CombinedOutput()
	if err == nil || ctx.Err() != nil || !strings.Contains(string(out), "is not a Linux program") || !strings.Contains(string(out), "--agent-binary") {
		t.Fatalf("exp serve to refuse a script as the agent, naming --agent-binary, got %v:\n%s", err, lastLines(string(out), 10))
	}
}

// patina-agent (sidecar/cmd/patina-agent), the in-container program alone,
// shipped with --agent-binary: workspaces run on it as on patina itself
// (init, agent, sessions that keep their state, a fork's copy), and it is
// the binary in their agent volume. Its size and the idle agent's RSS are
// logged beside patina's. Beside patina, with no --agent-binary, it is
// what serve ships.
func TestSmallAgentBinary(t *testing.T) {
	RequireDocker(t)
	dc := dockerClient(t)
	small := filepath.Join(t.TempDir(), "patina-agent")
	build := exec.Command("go", "build", "-o", small, "./sidecar/cmd/patina-agent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Dir = RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./sidecar/cmd/patina-agent: %v\n%s", err, out)
	}
	b, err := os.ReadFile(small)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	sum := hex.EncodeToString(s[:])
	volume := "patina-agent-" + sum[:16]
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := dc.VolumeRemove(ctx, volume, true); err != nil && !errdefs.IsNotFound(err) {
			t.Logf("remove the test's agent volume %s: %v", volume, err)
		}
	})

	h := StartWith(t, t.TempDir(), "e2e-small-agent", nil, []string{"--agent-binary", small})
	h.CreateWorkspace(pclient.CreateWorkspaceRequest{Name: "small"})
	checkRealAgent(t, h, "small", sum)
	h.Out("small", "default", "cd /tmp && export KEPT=yes && f() { echo fn; }")
	if got := h.Out("small", "default", `echo "$PWD $KEPT $(f)"`); got != "/tmp yes fn\n" {
		t.Fatalf("the session's state on patina-agent: %q", got)
	}
	h.Out("small", "default", "echo data > /workspace/file.txt")

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := h.Client.ForkWorkspace(ctx, "small", pclient.ForkWorkspaceRequest{Name: "small-fork"}); err != nil {
		t.Fatalf("fork (its copy runs patina-agent agent copy): %v", err)
	}
	if got := h.Out("small-fork", "default", "cat /workspace/file.txt; sha256sum /.patina/bin/patina | cut -d' ' -f1"); got != "data\n"+sum+"\n" {
		t.Fatalf("the fork: %q", got)
	}

	// The idle agent's resident memory, for the note (not a timed assertion).
	rss := h.Out("small", "default", `for p in /proc/[0-9]*; do if tr '\0' ' ' < $p/cmdline 2>/dev/null | grep -q '^/.patina/bin/patina agent serve'; then grep VmRSS $p/status; fi; done`)
	full, err := os.Stat(Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("patina-agent %d bytes (patina %d, %.2f×); the agent serving a workspace: %s", len(b), full.Size(), float64(len(b))/float64(full.Size()), strings.TrimSpace(rss))
	if !strings.Contains(rss, "VmRSS") {
		t.Fatalf("no agent process found in the workspace: %q", rss)
	}

	// Beside patina (as `go install ./sidecar/cmd/...` leaves them), it is
	// serve's default: no --agent-binary.
	dir := t.TempDir()
	for from, to := range map[string]string{Binary(t): "patina", small: "patina-agent"} {
		if err := copyFile(from, filepath.Join(dir, to)); err != nil {
			t.Fatal(err)
		}
	}
	hd := StartBinary(t, filepath.Join(dir, "patina"), t.TempDir(), "e2e-slim-default", nil, nil)
	hd.CreateWorkspace(pclient.CreateWorkspaceRequest{Name: "slim-default"})
	checkRealAgent(t, hd, "slim-default", sum)
	if got := hd.Out("slim-default", "default", "echo $((6*7))"); got != "42\n" {
		t.Fatalf("exec on the default patina-agent: %q", got)
	}
}

// copyFile copies from to to, executable.
func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o755)
}
