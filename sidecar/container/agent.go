package container

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/pkg/stdcopy"
	"golang.org/x/sys/unix"
)

// agentVolume is the read-only volume holding the patina binary the
// agent runs from. It is named after the binary's hash, filled once per
// engine (through a container that is never started, with the Docker API
// only: this works for a remote engine and for a sidecar in a container),
// and mounted read-only in every workspace, so nothing in a workspace can
// replace it.
type agentVolume struct {
	// bin is the binary, open for the process's life: its bytes are
	// streamed into the volume when it is filled, never held in memory
	// (tens of MB of the sidecar's RSS), and a binary replaced on disk by
	// an upgrade does not change what this open file reads.
	bin     *os.File
	size    int64
	name    string
	dynamic bool // linked against the host's libc: needs a glibc image

	mu    sync.Mutex
	ready bool
}

func (v *agentVolume) load(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("read the patina binary %s: %w", path, err)
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		f.Close()
		return fmt.Errorf("read the patina binary %s: %w", path, err)
	}
	if ef, err := elf.NewFile(f); err == nil {
		for _, p := range ef.Progs {
			if p.Type == elf.PT_INTERP {
				v.dynamic = true
			}
		}
	}
	v.bin, v.size, v.name = f, n, "patina-agent-"+hex.EncodeToString(h.Sum(nil))[:16]
	return nil
}

// invalidate makes the next ensure check what the volume holds.
func (v *agentVolume) invalidate() {
	v.mu.Lock()
	v.ready = false
	v.mu.Unlock()
}

// ensure makes sure the engine has the volume, filled, and returns its
// name. img is an image present on the engine (the workspace's), used for
// the never-started container the copy goes through. The first call in a
// process checks what the volume holds (a fill cut short by a crash is
// redone); later ones only that it still exists.
func (v *agentVolume) ensure(ctx context.Context, d *Docker, img string) (string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.ready {
		if _, err := d.api.VolumeInspect(ctx, v.name); err == nil {
			return v.name, nil
		}
		v.ready = false // removed behind our back
	}
	if _, err := d.api.VolumeCreate(ctx, volume.CreateOptions{Name: v.name, Labels: map[string]string{LabelManaged: "1", LabelRole: "agent"}}); err != nil {
		return "", fmt.Errorf("create volume %s: %w", v.name, err)
	}
	created, err := d.api.ContainerCreate(ctx, &container.Config{
		Image:      img,
		Entrypoint: []string{"/nonexistent"},
		Labels:     map[string]string{LabelManaged: "1", LabelRole: "agent-fill"},
	}, &container.HostConfig{
		Mounts:      []mount.Mount{{Type: mount.TypeVolume, Source: v.name, Target: "/agent"}},
		NetworkMode: "none",
	}, nil, nil, "")
	if err != nil {
		return "", fmt.Errorf("ship the patina binary (image %s): %w", img, err)
	}
	defer func() {
		_ = d.api.ContainerRemove(context.WithoutCancel(ctx), created.ID, container.RemoveOptions{Force: true})
	}()
	if st, err := d.api.ContainerStatPath(ctx, created.ID, "/agent/patina"); err == nil && st.Size == v.size && st.Mode.IsRegular() {
		v.ready = true
		return v.name, nil
	}
	// A tar of the one file, streamed from the open binary.
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		hdr := &tar.Header{Name: "patina", Mode: 0o755, Size: v.size, ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}
		err := tw.WriteHeader(hdr)
		if err == nil {
			_, err = io.Copy(tw, io.NewSectionReader(v.bin, 0, v.size))
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	err = d.api.CopyToContainer(ctx, created.ID, "/agent", pr, container.CopyToContainerOptions{})
	pr.Close()
	if err != nil {
		return "", fmt.Errorf("copy the patina binary into volume %s: %w", v.name, err)
	}
	v.ready = true
	d.log.Info("shipped the patina binary to the engine", "volume", v.name, "bytes", v.size)
	v.prune(ctx, d)
	return v.name, nil
}

// pruneAge is how old another binary's volume must be before prune takes
// it: a sidecar of another version that has just filled its volume, and
// not yet created the container that would pin it, keeps it.
const pruneAge = time.Hour

// prune removes the volumes of other patina binaries that no container
// uses and that were made more than pruneAge ago (one in use cannot be
// removed, and is left; a sidecar of another version whose volume went
// fills it again, see Create).
func (v *agentVolume) prune(ctx context.Context, d *Docker) {
	vl, ok := d.api.(interface {
		VolumeList(context.Context, volume.ListOptions) (volume.ListResponse, error)
	})
	if !ok {
		return
	}
	list, err := vl.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", LabelManaged+"=1"), filters.Arg("label", LabelRole+"=agent"))})
	if err != nil {
		return
	}
	for _, vol := range list.Volumes {
		made, err := time.Parse(time.RFC3339, vol.CreatedAt)
		if err != nil || time.Since(made) < pruneAge {
			continue
		}
		if vol.Name != v.name && strings.HasPrefix(vol.Name, "patina-agent-") {
			if err := d.api.VolumeRemove(ctx, vol.Name, false); err == nil {
				d.log.Debug("removed the agent volume of another patina binary", "volume", vol.Name)
			}
		}
	}
}

// AgentStart says how to start a workspace's agent.
type AgentStart struct {
	WorkspaceID string
	Token       string
	// Takeover makes the new agent replace one that holds the socket but
	// does not answer.
	Takeover bool
	// Args are more flags for `patina agent serve`.
	Args []string
	// Boot says the container has just been created or started: if its
	// init starts the agent (LabelAgentInit), StartAgent leaves that to it.
	Boot bool
}

// agentTokenEnv carries an agent's token (agent.TokenEnv).
const agentTokenEnv = "PATINA_AGENT_TOKEN"

// initCommand is the entrypoint of a container whose init starts its
// first agent. That agent takes over from no one (the container has just
// started): an agent started later with --takeover always wins over it.
func initCommand(a AgentStart) []string {
	a.Takeover = false
	return append([]string{AgentPath, "agent", "pause", "--once", "--"}, serveArgs(a)...)
}

// serveArgs are the arguments of `patina agent serve` for a.
func serveArgs(a AgentStart) []string {
	args := []string{"agent", "serve", "--workspace-id", a.WorkspaceID}
	if a.Takeover {
		args = append(args, "--takeover")
	}
	return append(args, a.Args...)
}

// StartAgent starts `patina agent serve` in the workspace's container,
// detached: it outlives the call and the sidecar. With a.Boot, a container
// whose init starts the agent itself, with these same flags, gets none
// from here (one made with other flags, e.g. another git identity, gets an
// agent with the current ones, which takes over).
func (d *Docker) StartAgent(ctx context.Context, containerID string, a AgentStart) error {
	if a.Boot {
		ci, err := d.api.ContainerInspect(ctx, containerID)
		if err == nil && ci.Config != nil && ci.Config.Labels[LabelAgentInit] == "1" &&
			slices.Equal([]string(ci.Config.Entrypoint), initCommand(a)) {
			return nil
		}
	}
	argv := append([]string{AgentPath}, serveArgs(a)...)
	ex, err := d.api.ContainerExecCreate(ctx, containerID, container.ExecOptions{
		Cmd:        argv,
		Env:        []string{agentTokenEnv + "=" + a.Token},
		User:       "0",
		WorkingDir: "/",
		Detach:     true,
	})
	if err != nil {
		if errdefs.IsNotFound(err) {
			return fmt.Errorf("container %s: %w", short(containerID), ErrNotFound)
		}
		return fmt.Errorf("start the agent in %s: %w", short(containerID), err)
	}
	if err := d.api.ContainerExecStart(ctx, ex.ID, container.ExecStartOptions{Detach: true}); err != nil {
		return fmt.Errorf("start the agent in %s: %w", short(containerID), err)
	}
	return nil
}

// DialAgent connects to the agent of a workspace's container, through the
// engine's transport.
func (d *Docker) DialAgent(ctx context.Context, containerID string) (net.Conn, error) {
	switch d.transport {
	case "netns":
		return d.dialNetns(ctx, containerID)
	case "auto":
		c, err := d.dialNetns(ctx, containerID)
		if errors.Is(err, errNoNetns) {
			d.log.Debug("the container's namespace is not reachable from here; using the exec relay", "container", short(containerID), "err", err)
			return d.dialExec(ctx, containerID)
		}
		return c, err
	}
	return d.dialExec(ctx, containerID)
}

// errNoNetns: the container's pid is not visible here as that container's
// (the sidecar runs in another pid namespace, say): use the exec relay.
var errNoNetns = errors.New("the container's network namespace is not reachable from here")

// dialNetns connects to the agent's abstract socket from inside the
// container's network namespace, found through the pid the engine reports
// for the container (never a pid from the container itself).
func (d *Docker) dialNetns(ctx context.Context, containerID string) (net.Conn, error) {
	ns, err := d.netns(ctx, containerID)
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	c, err := dialInNetns(ctx, ns, &unix.SockaddrUnix{Name: agentSocket})
	if errors.Is(err, unix.EPERM) {
		return nil, fmt.Errorf("%w: %v", errNoNetns, err)
	}
	return c, err
}

// netns opens a running container's network namespace, found through the
// pid the engine reports for it (never a pid from the container itself).
func (d *Docker) netns(ctx context.Context, containerID string) (*os.File, error) {
	st, err := d.Inspect(ctx, containerID)
	if err != nil {
		return nil, err
	}
	if !st.Running || st.Pid <= 0 {
		return nil, fmt.Errorf("container %s is not running", short(containerID))
	}
	// The pid must be the container's as this process sees pids: its
	// cgroup names the container.
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", st.Pid))
	if err != nil || !strings.Contains(string(cg), st.ID) {
		return nil, fmt.Errorf("%w: pid %d is not container %s here", errNoNetns, st.Pid, short(containerID))
	}
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", st.Pid))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNoNetns, err)
	}
	// The pid could have been reused between inspect and open: check that
	// the container still runs with it.
	if st2, err := d.Inspect(ctx, containerID); err != nil || !st2.Running || st2.Pid != st.Pid {
		ns.Close()
		return nil, fmt.Errorf("container %s changed while connecting", short(containerID))
	}
	return ns, nil
}

// agentSocket is the agent's abstract socket (agent.SocketName).
const agentSocket = "@patina-agent"

// dialExec starts `patina agent relay` in the container and speaks through
// its standard input and output.
func (d *Docker) dialExec(ctx context.Context, containerID string) (net.Conn, error) {
	ex, err := d.api.ContainerExecCreate(ctx, containerID, container.ExecOptions{
		Cmd:          []string{AgentPath, "agent", "relay"},
		User:         "0",
		WorkingDir:   "/",
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
	})
	if err != nil {
		if errdefs.IsNotFound(err) {
			return nil, fmt.Errorf("container %s: %w", short(containerID), ErrNotFound)
		}
		return nil, fmt.Errorf("exec the agent relay: %w", err)
	}
	hj, err := d.api.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		return nil, fmt.Errorf("attach the agent relay: %w", err)
	}
	return newExecConn(hj.Conn, hj.Reader, d.log), nil
}

// execConn is a net.Conn over a docker exec's hijacked stream: writes go
// to the process's stdin, reads come from its stdout (demultiplexed); its
// stderr is logged, bounded.
type execConn struct {
	net.Conn
	out  *io.PipeReader
	once sync.Once
}

func newExecConn(c net.Conn, r io.Reader, log interface{ Debug(string, ...any) }) *execConn {
	pr, pw := io.Pipe()
	ec := &execConn{Conn: c, out: pr}
	go func() {
		stderr := &boundedLog{max: 4096}
		_, err := stdcopy.StdCopy(pw, stderr, r)
		if stderr.buf.Len() > 0 {
			log.Debug("agent relay stderr", "text", stderr.buf.String())
		}
		if err == nil {
			err = errors.New("the agent relay ended")
			if msg := strings.TrimSpace(stderr.buf.String()); msg != "" {
				err = fmt.Errorf("the agent relay ended: %s", msg)
			}
		}
		pw.CloseWithError(err)
	}()
	return ec
}

func (c *execConn) Read(p []byte) (int, error) { return c.out.Read(p) }

func (c *execConn) Close() error {
	var err error
	c.once.Do(func() {
		err = c.Conn.Close()
		c.out.Close()
	})
	return err
}

// boundedLog keeps the first max bytes written to it.
type boundedLog struct {
	buf bytes.Buffer
	max int
}

func (b *boundedLog) Write(p []byte) (int, error) {
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
