package container

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/patina-dev/patina/sidecar/engine"
)

// ForkAPI is what forking a workspace needs of Docker beyond API.
type ForkAPI interface {
	ContainerCommit(ctx context.Context, containerID string, options container.CommitOptions) (container.CommitResponse, error)
	ContainerWait(ctx context.Context, containerID string, condition container.WaitCondition) (<-chan container.WaitResponse, <-chan error)
	ContainerLogs(ctx context.Context, containerID string, options container.LogsOptions) (io.ReadCloser, error)
	ImageRemove(ctx context.Context, imageID string, options image.RemoveOptions) ([]image.DeleteResponse, error)
}

// LabelForkOf marks an image committed from a workspace's container: to
// fork it, or to make its own container anew (a move to object stores).
const LabelForkOf = "dev.patina.fork-of"

// Commit saves a workspace container's filesystem (everything outside its
// volumes and mounts: installed packages, files under /root...) as the
// image ref, pausing the container meanwhile. It works on a stopped
// container too.
func (d *Docker) Commit(ctx context.Context, containerID, workspaceID, ref string) error {
	fa, ok := d.api.(ForkAPI)
	if !ok {
		return errors.New("this Docker client cannot commit containers")
	}
	_, err := fa.ContainerCommit(ctx, containerID, container.CommitOptions{
		Reference: ref,
		Pause:     true,
		Comment:   "patina: the container of workspace " + workspaceID,
		Changes:   []string{"LABEL " + LabelForkOf + "=" + workspaceID},
	})
	if cerrdefs.IsNotFound(err) {
		return fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	if err != nil {
		return fmt.Errorf("commit the container of workspace %s: %w", workspaceID, err)
	}
	return nil
}

// RemoveImage removes an image patina committed (a fork's); an image still
// used by a container or by another image stays.
func (d *Docker) RemoveImage(ctx context.Context, ref string) error {
	fa, ok := d.api.(ForkAPI)
	if !ok {
		return nil
	}
	_, err := fa.ImageRemove(ctx, ref, image.RemoveOptions{PruneChildren: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return err
	}
	return nil
}

// CopySpec: engine.CopySpec.
type CopySpec = engine.CopySpec

// copyTimeout bounds a fork's copy of volumes.
const copyTimeout = 30 * time.Minute

// logTailTimeout bounds reading a failed copier's last lines of output.
const logTailTimeout = 10 * time.Second

// CopyVolumes copies From's volumes into To's (created here) in a helper
// container that holds only the two (From's read-only), runs `patina agent
// copy` as root with no network and the workspace's own capabilities, and
// is removed after. Nothing of the copied trees is read on the host.
func (d *Docker) CopyVolumes(ctx context.Context, spec CopySpec) error {
	fa, ok := d.api.(ForkAPI)
	if !ok {
		return errors.New("this Docker client cannot wait for containers")
	}
	agentVol, err := d.agent.ensure(ctx, d)
	if err != nil {
		return err
	}
	mounts := []mount.Mount{agentMount(agentVol, AgentDir, true)}
	for _, role := range []string{"state", "files"} {
		from, to := spec.FromFiles, spec.ToFiles
		if role == "state" {
			from, to = "", ""
		}
		src := mount.Mount{Type: mount.TypeBind, Source: from, Target: "/from/" + role, ReadOnly: true}
		if from == "" {
			src = mount.Mount{Type: mount.TypeVolume, Source: VolumeName(spec.From, role), Target: "/from/" + role, ReadOnly: true}
		}
		dst := mount.Mount{Type: mount.TypeBind, Source: to, Target: "/to/" + role}
		if to == "" {
			name, err := d.ensureVolume(ctx, spec.To, role)
			if err != nil {
				return err
			}
			dst = mount.Mount{Type: mount.TypeVolume, Source: name, Target: "/to/" + role}
		}
		mounts = append(mounts, src, dst)
	}
	labels := maps.Clone(d.labels(spec.To))
	labels[LabelRole] = "copy"
	pids := int64(64)
	resp, err := d.api.ContainerCreate(ctx, &container.Config{
		Image:      spec.Image,
		Entrypoint: []string{AgentPath, "agent", "copy", "/from", "/to"},
		Cmd:        []string{},
		User:       "0:0",
		Labels:     labels,
	}, &container.HostConfig{
		Runtime:     d.cfg.Runtime, // it reads what the workspace wrote
		Mounts:      mounts,
		NetworkMode: "none",
		SecurityOpt: []string{"no-new-privileges"},
		CapDrop:     []string{"ALL"},
		CapAdd:      []string{"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID"},
		Resources:   container.Resources{Memory: 512 << 20, PidsLimit: &pids},
	}, nil, nil, "patina-copy-"+spec.To)
	if err != nil {
		return fmt.Errorf("create the copy of workspace %s: %w", spec.From, err)
	}
	cleanup := context.WithoutCancel(ctx)
	defer func() { _ = d.api.ContainerRemove(cleanup, resp.ID, container.RemoveOptions{Force: true}) }()
	ctx, cancel := context.WithTimeout(ctx, copyTimeout)
	defer cancel()
	waitC, errC := fa.ContainerWait(ctx, resp.ID, container.WaitConditionNextExit)
	if err := d.api.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		return fmt.Errorf("start the copy of workspace %s: %w", spec.From, err)
	}
	select {
	case w := <-waitC:
		if w.StatusCode == 0 {
			return nil
		}
		return fmt.Errorf("the copy of workspace %s failed (exit %d): %s", spec.From, w.StatusCode, d.logTail(cleanup, fa, resp.ID))
	case err := <-errC:
		return fmt.Errorf("the copy of workspace %s: %w", spec.From, err)
	case <-ctx.Done():
		return fmt.Errorf("the copy of workspace %s did not end within %s: %w", spec.From, copyTimeout, ctx.Err())
	}
}

// logTail is the end of a container's output, bounded.
func (d *Docker) logTail(ctx context.Context, fa ForkAPI, id string) string {
	ctx, cancel := context.WithTimeout(ctx, logTailTimeout)
	defer cancel()
	rc, err := fa.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: "20"})
	if err != nil {
		return err.Error()
	}
	defer rc.Close()
	var b strings.Builder
	lw := &limitWriter{w: &b, n: 4 << 10}
	_, _ = stdcopy.StdCopy(lw, lw, rc)
	return strings.TrimSpace(b.String())
}

type limitWriter struct {
	w io.Writer
	n int
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.n <= 0 {
		return len(p), nil
	}
	q := p
	if len(q) > l.n {
		q = q[:l.n]
	}
	l.n -= len(q)
	_, err := l.w.Write(q)
	return len(p), err
}
