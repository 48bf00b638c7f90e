package tests

import (
	"context"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
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
