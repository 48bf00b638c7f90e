// Package container runs patina workspaces' containers on Docker: it creates
// them from a Spec (labels, limits, bind mounts, no privileges), finds them
// again by label, and runs session processes inside them (Launcher
// implements session.Launcher with docker exec).
package container

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Labels on every container patina owns.
const (
	LabelManaged   = "dev.patina.managed"   // "1"
	LabelWorkspace = "dev.patina.workspace" // workspace id
	LabelName      = "dev.patina.name"      // workspace name
	LabelRepo      = "dev.patina.repo"      // the user's repository, if any
	LabelStateDir  = "dev.patina.state-dir" // the sidecar's state directory
)

// API is the part of the Docker client this package uses.
type API interface {
	ContainerCreate(ctx context.Context, config *container.Config, hostConfig *container.HostConfig, networkingConfig *network.NetworkingConfig, platform *ocispec.Platform, containerName string) (container.CreateResponse, error)
	ContainerStart(ctx context.Context, containerID string, options container.StartOptions) error
	ContainerStop(ctx context.Context, containerID string, options container.StopOptions) error
	ContainerRemove(ctx context.Context, containerID string, options container.RemoveOptions) error
	ContainerInspect(ctx context.Context, containerID string) (container.InspectResponse, error)
	ContainerList(ctx context.Context, options container.ListOptions) ([]container.Summary, error)
	ContainerExecCreate(ctx context.Context, containerID string, options container.ExecOptions) (container.ExecCreateResponse, error)
	ContainerExecStart(ctx context.Context, execID string, config container.ExecStartOptions) error
	ContainerExecAttach(ctx context.Context, execID string, config container.ExecAttachOptions) (types.HijackedResponse, error)
	ContainerExecInspect(ctx context.Context, execID string) (container.ExecInspect, error)
	Events(ctx context.Context, options events.ListOptions) (<-chan events.Message, <-chan error)
}

var _ API = (*client.Client)(nil)

// ErrNotFound: no such container.
var ErrNotFound = errors.New("container not found")

// Mount is a bind mount.
type Mount struct {
	Source, Target string
	ReadOnly       bool
}

// Spec describes a workspace's container.
type Spec struct {
	WorkspaceID string
	Name        string // workspace name (also the container's hostname)
	Repo        string
	StateDir    string
	Image       string
	Env         map[string]string
	MemoryMB    int64
	CPUs        float64
	PidsLimit   int64
	// Network is "bridge" or "none".
	Network    string
	Mounts     []Mount
	WorkingDir string
}

// ContainerName is the Docker name of a workspace's container.
func ContainerName(workspaceID string) string { return "patina-" + workspaceID }

// Create creates and starts a workspace's container: an init process
// keeping `sleep infinity` alive, the workspace's mounts and limits,
// no-new-privileges, not privileged, no Docker socket. It returns the
// container id.
func Create(ctx context.Context, api API, spec Spec) (string, error) {
	env := make([]string, 0, len(spec.Env)+4)
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		env = append(env, k+"="+spec.Env[k])
	}
	// The worktree and the repository's git directory are mounted from the
	// host; their owner may differ from the container's user.
	env = append(env, "PATINA_WORKSPACE="+spec.WorkspaceID,
		"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=safe.directory", "GIT_CONFIG_VALUE_0=*")
	init := true
	mounts := make([]mount.Mount, 0, len(spec.Mounts))
	for _, m := range spec.Mounts {
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly})
	}
	netMode := spec.Network
	if netMode == "" {
		netMode = "bridge"
	}
	hostname := spec.Name
	if len(hostname) > 63 {
		hostname = hostname[:63]
	}
	pids := spec.PidsLimit
	cfg := &container.Config{
		Image:      spec.Image,
		Cmd:        []string{"sleep", "infinity"},
		Env:        env,
		WorkingDir: spec.WorkingDir,
		Hostname:   hostname,
		Labels: map[string]string{
			LabelManaged:   "1",
			LabelWorkspace: spec.WorkspaceID,
			LabelName:      spec.Name,
			LabelRepo:      spec.Repo,
			LabelStateDir:  spec.StateDir,
		},
	}
	host := &container.HostConfig{
		Init:        &init,
		Mounts:      mounts,
		NetworkMode: container.NetworkMode(netMode),
		SecurityOpt: []string{"no-new-privileges"},
		Resources: container.Resources{
			Memory:    spec.MemoryMB << 20,
			NanoCPUs:  int64(spec.CPUs * 1e9),
			PidsLimit: &pids,
		},
	}
	resp, err := api.ContainerCreate(ctx, cfg, host, nil, nil, ContainerName(spec.WorkspaceID))
	if err != nil {
		return "", fmt.Errorf("create container for workspace %s: %w", spec.WorkspaceID, err)
	}
	if err := api.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		_ = api.ContainerRemove(context.Background(), resp.ID, container.RemoveOptions{Force: true})
		return "", fmt.Errorf("start container for workspace %s: %w", spec.WorkspaceID, err)
	}
	return resp.ID, nil
}

// State is what Inspect reports.
type State struct {
	ID      string
	Running bool
	Status  string // Docker's: created, running, exited, dead...
	Error   string
}

// Inspect returns a container's state; ErrNotFound when it is gone.
func Inspect(ctx context.Context, api API, id string) (State, error) {
	info, err := api.ContainerInspect(ctx, id)
	if errdefs.IsNotFound(err) {
		return State{}, fmt.Errorf("container %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return State{}, err
	}
	st := State{ID: info.ID}
	if info.State != nil {
		st.Running = info.State.Running && !info.State.Paused
		st.Status = string(info.State.Status)
		st.Error = info.State.Error
		if !info.State.Running && info.State.ExitCode != 0 {
			st.Error = strings.TrimSpace(st.Error + " exit code " + strconv.Itoa(info.State.ExitCode))
		}
		if info.State.OOMKilled {
			st.Error = strings.TrimSpace(st.Error + " (killed: out of memory)")
		}
	}
	return st, nil
}

// Start starts a stopped container.
func Start(ctx context.Context, api API, id string) error {
	err := api.ContainerStart(ctx, id, container.StartOptions{})
	if errdefs.IsNotFound(err) {
		return fmt.Errorf("container %s: %w", id, ErrNotFound)
	}
	return err
}

// Stop stops a container (SIGTERM, then SIGKILL after timeout).
func Stop(ctx context.Context, api API, id string, timeout time.Duration) error {
	secs := int(timeout / time.Second)
	err := api.ContainerStop(ctx, id, container.StopOptions{Timeout: &secs})
	if errdefs.IsNotFound(err) {
		return fmt.Errorf("container %s: %w", id, ErrNotFound)
	}
	return err
}

// Remove removes a container, running or not. A missing one is not an error.
func Remove(ctx context.Context, api API, id string) error {
	err := api.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("remove container %s: %w", id, err)
	}
	return nil
}

// Owned is a container patina created, found by its labels.
type Owned struct {
	ID          string
	WorkspaceID string
	Name        string
	StateDir    string
	Running     bool
}

// List finds every container patina owns (for stateDir, if not empty).
func List(ctx context.Context, api API, stateDir string) ([]Owned, error) {
	f := filters.NewArgs(filters.Arg("label", LabelManaged+"=1"))
	if stateDir != "" {
		f.Add("label", LabelStateDir+"="+stateDir)
	}
	cs, err := api.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	out := make([]Owned, 0, len(cs))
	for _, c := range cs {
		out = append(out, Owned{
			ID:          c.ID,
			WorkspaceID: c.Labels[LabelWorkspace],
			Name:        c.Labels[LabelName],
			StateDir:    c.Labels[LabelStateDir],
			Running:     c.State == container.StateRunning,
		})
	}
	return out, nil
}

// Watch calls fn with the workspace id whenever one of stateDir's
// containers dies or is destroyed, until ctx ends.
func Watch(ctx context.Context, api API, stateDir string, fn func(workspaceID, action string)) {
	f := filters.NewArgs(
		filters.Arg("type", string(events.ContainerEventType)),
		filters.Arg("label", LabelManaged+"=1"),
		filters.Arg("label", LabelStateDir+"="+stateDir),
		filters.Arg("event", string(events.ActionDie)),
		filters.Arg("event", string(events.ActionDestroy)),
		filters.Arg("event", string(events.ActionStart)),
	)
	for ctx.Err() == nil {
		msgs, errs := api.Events(ctx, events.ListOptions{Filters: f})
	loop:
		for {
			select {
			case m := <-msgs:
				fn(m.Actor.Attributes[LabelWorkspace], string(m.Action))
			case <-errs:
				break loop
			case <-ctx.Done():
				return
			}
		}
		select { // the engine restarted or the stream broke: retry
		case <-time.After(time.Second):
		case <-ctx.Done():
		}
	}
}
