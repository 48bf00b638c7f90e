package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	pcontainer "github.com/patina-dev/patina/sidecar/container"
)

// DockerAPI is the part of the Docker client Run uses: execs for the
// baseline, an image check, and container removal to clean up.
type DockerAPI interface {
	ContainerExecCreate(ctx context.Context, containerID string, options container.ExecOptions) (container.ExecCreateResponse, error)
	ContainerExecAttach(ctx context.Context, execID string, config container.ExecAttachOptions) (types.HijackedResponse, error)
	ContainerExecInspect(ctx context.Context, execID string) (container.ExecInspect, error)
	ContainerList(ctx context.Context, options container.ListOptions) ([]container.Summary, error)
	ContainerRemove(ctx context.Context, containerID string, options container.RemoveOptions) error
	ImageInspect(ctx context.Context, ref string, opts ...client.ImageInspectOption) (image.InspectResponse, error)
	ContainerTop(ctx context.Context, containerID string, arguments []string) (container.TopResponse, error)
	ContainerInspect(ctx context.Context, containerID string) (container.InspectResponse, error)
	ContainerCreate(ctx context.Context, config *container.Config, hostConfig *container.HostConfig, networkingConfig *network.NetworkingConfig, platform *ocispec.Platform, containerName string) (container.CreateResponse, error)
	ContainerStart(ctx context.Context, containerID string, options container.StartOptions) error
	NetworkCreate(ctx context.Context, name string, options network.CreateOptions) (network.CreateResponse, error)
	NetworkRemove(ctx context.Context, networkID string) error
	ContainerStatsOneShot(ctx context.Context, containerID string) (container.StatsResponseReader, error)
	Info(ctx context.Context) (system.Info, error)
}

var _ DockerAPI = (*client.Client)(nil)

// dockerExec runs `true` in a container the way a client of the Docker API
// would: exec create, attach (which starts it), read the output to EOF,
// then inspect until it is no longer running.
func dockerExec(ctx context.Context, api DockerAPI, containerID string) error {
	ex, err := api.ContainerExecCreate(ctx, containerID, container.ExecOptions{
		Cmd:          []string{"true"},
		AttachStdout: true,
		AttachStderr: true,
	})
	if err != nil {
		return fmt.Errorf("exec create: %w", err)
	}
	att, err := api.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		return fmt.Errorf("exec attach: %w", err)
	}
	_, err = stdcopy.StdCopy(io.Discard, io.Discard, att.Reader)
	att.Close()
	if err != nil {
		return fmt.Errorf("exec read: %w", err)
	}
	for {
		ins, err := api.ContainerExecInspect(ctx, ex.ID)
		if err != nil {
			return fmt.Errorf("exec inspect: %w", err)
		}
		if !ins.Running {
			if ins.ExitCode != 0 {
				return fmt.Errorf("docker exec true: exit status %d", ins.ExitCode)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// removeContainers force-removes the containers a sidecar with stateDir
// left behind (the safety net when deleting its workspaces failed).
func removeContainers(ctx context.Context, api DockerAPI, stateDir string) error {
	if full, ok := api.(pcontainer.API); ok {
		return pcontainer.Cleanup(ctx, full, stateDir) // containers and volumes
	}
	cs, err := api.ContainerList(ctx, container.ListOptions{
		All:     true,
		Filters: filters.NewArgs(filters.Arg("label", pcontainer.LabelStateDir+"="+stateDir)),
	})
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	var errs []error
	for _, c := range cs {
		if err := api.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}); err != nil {
			errs = append(errs, fmt.Errorf("remove container %s: %w", c.ID, err))
		}
	}
	return errors.Join(errs...)
}
