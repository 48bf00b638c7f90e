package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/patina-dev/patina/sidecar/image"
)

// SecondEngine is another Docker engine on this machine, standing in for
// another host: the host's own dockerd run in a network namespace of its
// own (joined to the host by a veth pair), with its own data root, exec
// root and socket, reachable at Host (tcp://10.231.N.2:2375). The default
// workspace image is copied into it (no registry is reachable).
type SecondEngine struct {
	Host   string // DOCKER_HOST for it
	Addr   string // its address on the veth pair
	Socket string // its unix socket, on this host
	ns     string
	veth   string
	dir    string
	run    string
	tag    string
	cmd    *exec.Cmd
	done   chan struct{} // closed when cmd has been waited for
}

// StartSecondEngine starts a second engine for the test and removes
// everything it made at the end. It needs root, iproute2, util-linux's
// nsenter/unshare and fuse-overlayfs (.ci/run installs them); where there
// is no /dev/fuse (inside some containers, e.g. Dagger's test --integration)
// its storage driver is vfs instead: slower, but it works on any
// filesystem.
func StartSecondEngine(t testing.TB) *SecondEngine {
	t.Helper()
	return startEngine(t, nil)
}

// startEngine starts a second engine whose daemon.json has more settings
// (runtimes, say) besides its storage driver.
func startEngine(t testing.TB, settings map[string]any) *SecondEngine {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a second Docker engine (skipped with -short)")
	}
	RequireDocker(t) // and the default image, copied to the new engine
	if os.Geteuid() != 0 {
		t.Fatal("a second Docker engine needs root (network namespaces, dockerd)")
	}
	driver := "fuse-overlayfs"
	if _, err := os.Stat("/dev/fuse"); err != nil {
		driver = "vfs"
	}
	tools := []string{"ip", "nsenter", "unshare", "dockerd"}
	if driver == "fuse-overlayfs" {
		tools = append(tools, "fuse-overlayfs")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("a second Docker engine needs %s (apt-get install iproute2 util-linux docker.io fuse-overlayfs; .ci/run does)", tool)
		}
	}
	n := 10 + rand.IntN(240)
	tag := fmt.Sprintf("pe2%d%03d", os.Getpid()%1000, n)
	e := &SecondEngine{
		Addr: fmt.Sprintf("10.231.%d.2", n),
		ns:   "patina-" + tag,
		veth: tag,
		dir:  t.TempDir(),
		run:  filepath.Join("/run", "patina-"+tag),
		tag:  tag,
	}
	e.Socket = filepath.Join(e.run, "docker.sock")
	e.Host = "tcp://" + e.Addr + ":2375"
	t.Cleanup(e.stop)
	sh := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	host := fmt.Sprintf("10.231.%d.1", n)
	sh("ip", "netns", "add", e.ns)
	sh("ip", "link", "add", e.veth+"h", "type", "veth", "peer", "name", e.veth+"c")
	sh("ip", "link", "set", e.veth+"c", "netns", e.ns)
	sh("ip", "addr", "add", host+"/24", "dev", e.veth+"h")
	sh("ip", "link", "set", e.veth+"h", "up")
	sh("ip", "-n", e.ns, "addr", "add", e.Addr+"/24", "dev", e.veth+"c")
	sh("ip", "-n", e.ns, "link", "set", e.veth+"c", "up")
	sh("ip", "-n", e.ns, "link", "set", "lo", "up")
	sh("ip", "-n", e.ns, "route", "add", "default", "via", host)
	if err := os.MkdirAll(e.run, 0o700); err != nil {
		t.Fatal(err)
	}
	daemon := map[string]any{"storage-driver": driver}
	for k, v := range settings {
		daemon[k] = v
	}
	cfg, _ := json.Marshal(daemon)
	if err := os.WriteFile(filepath.Join(e.dir, "daemon.json"), cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	e.StartDaemon(t)
	e.copyImage(t, image.DefaultTag)
	return e
}

// StartDaemon starts the engine's dockerd (again, after StopDaemon: same
// data root, so it keeps its containers, volumes and swarm membership) and
// waits until it answers.
func (e *SecondEngine) StartDaemon(t testing.TB) {
	t.Helper()
	logf, err := os.OpenFile(filepath.Join(e.dir, "dockerd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	// Under `ip netns exec` dockerd fails ("Devices cgroup isn't mounted":
	// it remounts /sys); nsenter into the namespace keeps the host's /sys.
	e.cmd = exec.Command("nsenter", "--net=/run/netns/"+e.ns, "unshare", "--uts", "dockerd",
		"--config-file", filepath.Join(e.dir, "daemon.json"),
		"--data-root", filepath.Join(e.dir, "data"),
		"--exec-root", filepath.Join(e.run, "exec"),
		"--pidfile", filepath.Join(e.run, "docker.pid"),
		"--cgroup-parent", "patina-"+e.tag,
		"-H", "unix://"+e.Socket, "-H", e.Host)
	e.cmd.Stdout, e.cmd.Stderr = logf, logf
	e.cmd.Env = append(os.Environ(), "DOCKER_SERVICE_PREFER_OFFLINE_IMAGE=1")
	if err := e.cmd.Start(); err != nil {
		t.Fatalf("start the second dockerd: %v", err)
	}
	e.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(e.cmd, e.done)
	c := e.Client(t)
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := c.Ping(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("the second dockerd did not answer at %s: %v\n%s", e.Host, err, lastLines(string(b), 30))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// StopDaemon stops the engine's dockerd (SIGTERM, then SIGKILL after 30 s),
// as a host whose engine goes away; its containers stop with it.
func (e *SecondEngine) StopDaemon() {
	if e.cmd == nil || e.cmd.Process == nil {
		return
	}
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.done:
	case <-time.After(30 * time.Second):
		_ = e.cmd.Process.Kill()
		<-e.done
	}
	e.cmd = nil
}

// Client is a Docker client of the second engine.
func (e *SecondEngine) Client(t testing.TB) *client.Client {
	t.Helper()
	c, err := client.NewClientWithOpts(client.WithHost(e.Host), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// copyImage copies an image of this host's engine into the second one
// (docker save | docker load).
func (e *SecondEngine) copyImage(t testing.TB, ref string) {
	t.Helper()
	local, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rc, err := local.ImageSave(ctx, []string{ref})
	if err != nil {
		t.Fatalf("save %s: %v", ref, err)
	}
	defer rc.Close()
	resp, err := e.Client(t).ImageLoad(ctx, rc)
	if err != nil {
		t.Fatalf("load %s into the second engine: %v", ref, err)
	}
	defer resp.Body.Close()
	b, _ := readAllLimited(resp.Body, 1<<20)
	if strings.Contains(string(b), `"error"`) {
		t.Fatalf("load %s into the second engine: %s", ref, b)
	}
}

// stop ends the second engine and removes its namespace, its link and its
// files: the host is left as it was.
func (e *SecondEngine) stop() {
	e.StopDaemon()
	// What the engine may have left mounted under its directories.
	if b, err := os.ReadFile("/proc/self/mounts"); err == nil {
		lines := strings.Split(string(b), "\n")
		for i := len(lines) - 1; i >= 0; i-- {
			f := strings.Fields(lines[i])
			if len(f) > 1 && (strings.HasPrefix(f[1], e.dir) || strings.HasPrefix(f[1], e.run)) {
				_ = syscall.Unmount(f[1], syscall.MNT_DETACH)
			}
		}
	}
	_ = exec.Command("ip", "link", "del", e.veth+"h").Run()
	_ = exec.Command("ip", "netns", "del", e.ns).Run()
	_ = os.RemoveAll(e.run)
	_ = os.RemoveAll(e.dir)
}

func readAllLimited(r interface{ Read([]byte) (int, error) }, max int) ([]byte, error) {
	var out []byte
	buf := make([]byte, 32<<10)
	for len(out) < max {
		n, err := r.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			return out, nil
		}
	}
	return out, nil
}

var _ = strconv.Itoa
