package tests

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/go-connections/nat"

	pclient "github.com/patina-dev/patina/sidecar/client"
	pcontainer "github.com/patina-dev/patina/sidecar/container"
	pimage "github.com/patina-dev/patina/sidecar/image"
)

// sidecarImage builds, offline, the image the containerized sidecar runs
// in tests: patina/base plus the binary, with the entrypoint of the
// `build-image` image. It returns the tag; the image is removed at the end.
func sidecarImage(t *testing.T, dc *client.Client) string {
	t.Helper()
	bin, err := os.ReadFile(Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	tag := fmt.Sprintf("patina/sidecar-test:%d", time.Now().UnixNano())
	var ctxTar bytes.Buffer
	tw := tar.NewWriter(&ctxTar)
	dockerfile := "FROM " + pimage.DefaultTag + "\nCOPY patina /usr/local/bin/patina\nENTRYPOINT [\"patina\", \"serve\", \"--addr\", \"0.0.0.0:7070\"]\n"
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{{"Dockerfile", 0o644, []byte(dockerfile)}, {"patina", 0o755, bin}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.data); err != nil {
			t.Fatal(err)
		}
	}
	tw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	resp, err := dc.ImageBuild(ctx, &ctxTar, types.ImageBuildOptions{Tags: []string{tag}, Remove: true, ForceRemove: true})
	if err != nil {
		t.Fatalf("build the sidecar image: %v", err)
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var msg struct {
			Error string `json:"error"`
		}
		if err := dec.Decode(&msg); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("build the sidecar image: %v", err)
		}
		if msg.Error != "" {
			t.Fatalf("build the sidecar image: %s", msg.Error)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = dc.ImageRemove(ctx, tag, image.RemoveOptions{Force: true, PruneChildren: true})
	})
	return tag
}

// The sidecar run as a container, as README's deployment line runs it:
// the Docker socket, the state directory and the repository mounted at
// their own paths. It creates workspaces, runs commands, and does
// diff/commit/merge on the repository.
func TestContainerizedSidecar(t *testing.T) {
	RequireDocker(t)
	dc, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	stateDir := t.TempDir()
	repo := GitRepo(t, map[string]string{"main.go": "package main\n"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := startContainerizedSidecar(t, dc, stateDir, nil, &container.HostConfig{Binds: []string{repo + ":" + repo}})
	out := func(ws, cmd string) string {
		t.Helper()
		res, err := c.Exec(ctx, ws, "default", pclient.ExecRequest{Command: cmd})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("exec %q: %+v %v", cmd, res, err)
		}
		return res.Stdout
	}
	if _, err := c.CreateWorkspace(ctx, pclient.CreateWorkspaceRequest{Name: "scratch"}); err != nil {
		t.Fatalf("create a scratch workspace: %v", err)
	}
	if got := out("scratch", "cd /tmp; export X=1; echo $X"); got != "1\n" {
		t.Fatalf("scratch: %q", got)
	}
	if got := out("scratch", "echo $PWD $X"); got != "/tmp 1\n" {
		t.Fatalf("scratch state: %q", got)
	}
	ws, err := c.CreateWorkspace(ctx, pclient.CreateWorkspaceRequest{Name: "repo", Repo: repo})
	if err != nil {
		t.Fatalf("create a repository workspace: %v", err)
	}
	if ws.Agent == nil || !ws.Agent.Connected {
		t.Fatalf("the agent: %+v", ws.Agent)
	}
	out("repo", "echo '// from the containerized sidecar' >> main.go && git commit -qam agent")
	d, err := c.Diff(ctx, "repo")
	if err != nil || !strings.Contains(d.Text, "+// from the containerized sidecar") {
		t.Fatalf("diff: %+v %v", d, err)
	}
	out("repo", "echo more > more.txt")
	cr, err := c.Commit(ctx, "repo", pclient.CommitRequest{Message: "more"})
	if err != nil || !cr.Committed || cr.Reviewed {
		t.Fatalf("commit (of more than the diff showed): %+v %v", cr, err)
	}
	if _, err := c.Diff(ctx, "repo"); err != nil {
		t.Fatal(err)
	}
	if mr, err := c.Merge(ctx, "repo", pclient.MergeRequest{}); err != nil || !mr.FastForward {
		t.Fatalf("merge: %+v %v", mr, err)
	}
	b, err := os.ReadFile(filepath.Join(repo, "more.txt"))
	if err != nil || string(b) != "more\n" {
		t.Fatalf("the merge did not reach the repository on the host: %q %v", b, err)
	}
	if log, _ := exec.Command("git", "-C", repo, "log", "--format=%s", "-3").Output(); !strings.HasPrefix(string(log), "more\nagent\n") {
		t.Fatalf("the repository's history: %q", log)
	}
	for _, name := range []string{"scratch", "repo"} {
		if err := c.DeleteWorkspace(ctx, name, pclient.DeleteOptions{}); err != nil {
			t.Fatalf("delete %s: %v", name, err)
		}
	}
}

// startContainerizedSidecar runs the sidecar as a container of this host's
// engine, as README's deployment line does: the Docker socket and the
// state directory mounted at their own paths, its port published on
// loopback; args are added to serve's, hc's binds to the others (and its
// other fields kept). It returns a client of it, once it answers; the
// container goes at the end of the test, with what it made.
func startContainerizedSidecar(t *testing.T, dc *client.Client, stateDir string, args []string, hc *container.HostConfig) *pclient.Client {
	t.Helper()
	sock := strings.TrimPrefix(dc.DaemonHost(), "unix://")
	if sock == dc.DaemonHost() {
		t.Fatalf("this test mounts the engine's socket into the sidecar: DOCKER_HOST must be a unix socket, got %s", dc.DaemonHost())
	}
	tag := sidecarImage(t, dc)
	token := "containerized-" + fmt.Sprint(time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if hc == nil {
		hc = &container.HostConfig{}
	}
	hc.Binds = append([]string{sock + ":/var/run/docker.sock", stateDir + ":" + stateDir}, hc.Binds...)
	hc.PortBindings = nat.PortMap{"7070/tcp": []nat.PortBinding{{HostIP: "127.0.0.1", HostPort: "0"}}}
	created, err := dc.ContainerCreate(ctx, &container.Config{
		Image:        tag,
		Cmd:          append([]string{"--state-dir", stateDir, "--token", token}, args...),
		ExposedPorts: nat.PortSet{"7070/tcp": struct{}{}},
	}, hc, nil, nil, "")
	if err != nil {
		t.Fatalf("create the sidecar's container: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if t.Failed() {
			if rc, err := dc.ContainerLogs(ctx, created.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: "60"}); err == nil {
				b, _ := io.ReadAll(rc)
				rc.Close()
				t.Logf("the sidecar's logs:\n%s", b)
			}
		}
		_ = dc.ContainerRemove(ctx, created.ID, container.RemoveOptions{Force: true})
		_ = pcontainer.Cleanup(ctx, dc, stateDir)
	})
	if err := dc.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		t.Fatalf("start the sidecar: %v", err)
	}
	info, err := dc.ContainerInspect(ctx, created.ID)
	if err != nil || info.NetworkSettings == nil || len(info.NetworkSettings.Ports["7070/tcp"]) == 0 {
		t.Fatalf("the sidecar's port: %v", err)
	}
	c := pclient.New("127.0.0.1:"+info.NetworkSettings.Ports["7070/tcp"][0].HostPort, token, nil)
	WaitFor(t, "the containerized sidecar to answer", time.Minute, func() bool {
		hctx, hcancel := context.WithTimeout(ctx, time.Second)
		defer hcancel()
		return c.Health(hctx) == nil
	})
	return c
}
