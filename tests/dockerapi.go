package tests

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
)

// RemoveContainer force-removes a container through the Docker API (the
// engine DOCKER_HOST names), as `docker rm -f` would, without needing the
// docker CLI: test images such as the golang one used by the Dagger
// module have none.
func RemoveContainer(t testing.TB, id string) {
	t.Helper()
	c, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatalf("docker client: %v", err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.ContainerRemove(ctx, id, container.RemoveOptions{Force: true}); err != nil {
		t.Fatalf("remove container %s: %v", id, err)
	}
}

// ContainerState is a container's status as the engine says it
// (running, paused, exited...; "" when it is gone).
func ContainerState(t testing.TB, id string) string {
	t.Helper()
	c := dockerClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := c.ContainerInspect(ctx, id)
	if client.IsErrNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatalf("inspect container %s: %v", id, err)
	}
	return string(info.State.Status)
}

// dockerClient is a client of the engine DOCKER_HOST names, closed at the
// end of the test.
func dockerClient(t testing.TB) *client.Client {
	t.Helper()
	c, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatalf("docker client: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// dockerExec runs cmd in a container through the engine, not patina (for
// when the sidecar is down), and returns its exit code and output.
func dockerExec(t testing.TB, c *client.Client, id string, cmd []string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ex, err := c.ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		t.Fatalf("docker exec %v: %v", cmd, err)
	}
	att, err := c.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		t.Fatalf("docker exec %v: %v", cmd, err)
	}
	defer att.Close()
	var out bytes.Buffer
	_, _ = stdcopy.StdCopy(&out, &out, att.Reader)
	insp, err := c.ContainerExecInspect(ctx, ex.ID)
	if err != nil {
		t.Fatalf("docker exec %v: %v", cmd, err)
	}
	return insp.ExitCode, out.String()
}
