package container

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/patina-dev/patina/session"
)

// Launcher runs session processes inside a container with docker exec.
// Session directories are bind-mounted at the same path, so the host side
// reads and writes the same FIFOs and files.
type Launcher struct {
	API         API
	ContainerID string
	// User runs the processes as this user (default: the image's).
	User string
}

var _ session.Launcher = (*Launcher)(nil)

// Start implements session.Launcher: a detached docker exec.
func (l *Launcher) Start(ctx context.Context, p session.Process) error {
	resp, err := l.API.ContainerExecCreate(ctx, l.ContainerID, container.ExecOptions{
		Cmd:        p.Argv,
		Env:        p.Env,
		WorkingDir: p.Dir,
		User:       l.User,
		Detach:     true,
	})
	if err != nil {
		return fmt.Errorf("docker exec in %s: %w", short(l.ContainerID), err)
	}
	if err := l.API.ContainerExecStart(ctx, resp.ID, container.ExecStartOptions{Detach: true}); err != nil {
		if p.Dir != "" && strings.Contains(err.Error(), "chdir to cwd") {
			return fmt.Errorf("%w: working directory %s: no such directory in the container", session.ErrInvalid, p.Dir)
		}
		return fmt.Errorf("docker exec start in %s: %w", short(l.ContainerID), err)
	}
	return nil
}

// Run implements session.Launcher: docker exec, wait, exit code.
func (l *Launcher) Run(ctx context.Context, p session.Process) ([]byte, error) {
	resp, err := l.API.ContainerExecCreate(ctx, l.ContainerID, container.ExecOptions{
		Cmd:          p.Argv,
		Env:          p.Env,
		WorkingDir:   p.Dir,
		User:         l.User,
		AttachStdout: true,
		AttachStderr: true,
	})
	if err != nil {
		return nil, fmt.Errorf("docker exec in %s: %w", short(l.ContainerID), err)
	}
	att, err := l.API.ContainerExecAttach(ctx, resp.ID, container.ExecAttachOptions{})
	if err != nil {
		return nil, fmt.Errorf("docker exec attach in %s: %w", short(l.ContainerID), err)
	}
	defer att.Close()
	var stdout, stderr bytes.Buffer
	done := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(&stdout, &stderr, att.Reader)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			return nil, fmt.Errorf("docker exec output: %w", err)
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for {
		ins, err := l.API.ContainerExecInspect(ctx, resp.ID)
		if err != nil {
			return stdout.Bytes(), fmt.Errorf("docker exec inspect: %w", err)
		}
		if !ins.Running {
			if ins.ExitCode != 0 {
				return stdout.Bytes(), fmt.Errorf("%s exited with status %d: %s", p.Argv[0], ins.ExitCode, bytes.TrimSpace(stderr.Bytes()))
			}
			return stdout.Bytes(), nil
		}
		select {
		case <-time.After(time.Millisecond):
		case <-ctx.Done():
			return stdout.Bytes(), ctx.Err()
		}
	}
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
