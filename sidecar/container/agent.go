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
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/pkg/stdcopy"
	"golang.org/x/sys/unix"

	"github.com/patina-dev/patina/sidecar/engine"
)

// agentVolume is the read-only volume holding the patina binary the
// agent runs from, named after the binary's hash and mounted read-only in
// every workspace. Its content comes from one place only: this process's
// own executable, streamed into it by the sidecar (Docker API only: this
// works for a remote engine and for a sidecar in a container). Nothing of
// an image reaches it: every mount of it, the workspaces' own included, is
// NoCopy (Docker would otherwise copy the image's files at the mount point
// into it while it is empty), and it is filled and read through a
// never-started container of an image patina makes itself (fillImage),
// never a workspace's. Before this process first uses it, and after every
// fill, the sidecar reads the file back through the engine and checks its
// sha256 against its own binary's (DESIGN.md, "The agent's binary"); a
// volume that fails is filled again, or refused (ErrAgentBinary).
type agentVolume struct {
	// bin is the binary, open for the process's life: its bytes are
	// streamed into the volume when it is filled, never held in memory
	// (tens of MB of the sidecar's RSS), and a binary replaced on disk by
	// an upgrade does not change what this open file reads.
	bin     *os.File
	size    int64
	sum     [sha256.Size]byte // of the whole binary
	name    string
	dynamic bool // linked against the host's libc: needs a glibc image

	mu    sync.Mutex  // one check or fill at a time
	ready atomic.Bool // verified by this process since it was last filled or found
}

// ErrAgentBinary: engine.ErrAgentBinary.
var ErrAgentBinary = engine.ErrAgentBinary

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
	ef, err := elf.NewFile(f)
	if err != nil {
		f.Close()
		return fmt.Errorf("%s is not a Linux program (%v): the agent runs in Linux containers; name a Linux build of patina for the engine's architecture with --agent-binary (CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go build -o patina-linux-arm64 ./sidecar/cmd/patina)", path, err)
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			v.dynamic = true
		}
	}
	copy(v.sum[:], h.Sum(nil))
	v.bin, v.size, v.name = f, n, "patina-agent-"+hex.EncodeToString(v.sum[:])[:16]
	return nil
}

// binary returns a reader of the whole binary.
func (v *agentVolume) binary() io.Reader { return io.NewSectionReader(v.bin, 0, v.size) }

// invalidate makes the next ensure verify what the volume holds.
func (v *agentVolume) invalidate() { v.ready.Store(false) }

// replaced reports whether the volume is gone, or is not the one patina
// made: Docker makes a volume a mount names anew, empty and without
// labels, when something (another sidecar's prune) removed it after it
// was verified.
func (v *agentVolume) replaced(ctx context.Context, d *Docker) bool {
	vol, err := d.api.VolumeInspect(ctx, v.name)
	if errdefs.IsNotFound(err) {
		return true
	}
	return err == nil && vol.Labels[LabelRole] != "agent"
}

// verified makes sure the volume has been verified by this process (and
// filled, if it had to be), without asking the engine again when it has:
// what runs the binary in a container that exists already (a docker exec
// of the agent or its relay) calls it.
func (v *agentVolume) verified(ctx context.Context, d *Docker) error {
	if v.ready.Load() {
		return nil
	}
	_, err := v.ensure(ctx, d)
	return err
}

// Where the fill container mounts the volume, and how long a check or a
// fill may take (a remote engine on a slow link: the whole binary crosses
// it).
const (
	agentFillDir     = "/agent"
	agentFillTimeout = 5 * time.Minute
	// fillAttempts and fillRetryWait bound the fills of a volume that
	// other sidecars fill at the same moment (see ensure).
	fillAttempts  = 5
	fillRetryWait = 500 * time.Millisecond
)

// ensure makes sure the engine has the volume, holding this binary, and
// returns its name. The first call in a process, and any after the volume
// went, reads the volume's file back and checks its hash, filling it when
// it is missing or differs; later ones only check that it still exists
// (without waiting for the lock a check holds).
func (v *agentVolume) ensure(ctx context.Context, d *Docker) (string, error) {
	if v.ready.Load() {
		if _, err := d.api.VolumeInspect(ctx, v.name); err == nil {
			return v.name, nil
		}
		v.ready.Store(false) // removed behind our back
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.ready.Load() {
		return v.name, nil // checked by the call this one waited for
	}
	ctx, cancel := context.WithTimeout(ctx, agentFillTimeout)
	defer cancel()
	vol, err := d.api.VolumeCreate(ctx, volume.CreateOptions{Name: v.name, Driver: "local", Labels: map[string]string{LabelManaged: "1", LabelRole: "agent"}})
	if err != nil {
		return "", fmt.Errorf("create volume %s: %w", v.name, err)
	}
	if vol.Driver != "local" || len(vol.Options) > 0 {
		// A volume of that name made by something else, whose data may
		// live where others write (a bind of a host directory, say).
		return "", fmt.Errorf("%w: volume %s exists with driver %q and options %v, not as patina makes it: remove it (docker volume rm %s) and patina makes it anew", ErrAgentBinary, v.name, vol.Driver, vol.Options, v.name)
	}
	img, err := d.fillImage(ctx)
	if err != nil {
		return "", fmt.Errorf("ship the patina binary: %w", err)
	}
	created, err := d.api.ContainerCreate(ctx, &container.Config{
		Image:      img,
		Entrypoint: []string{"/nonexistent"},
		Labels:     map[string]string{LabelManaged: "1", LabelRole: "agent-fill"},
	}, &container.HostConfig{
		Mounts:      []mount.Mount{agentMount(v.name, agentFillDir, false)},
		NetworkMode: "none",
	}, nil, nil, "")
	if err != nil {
		return "", fmt.Errorf("ship the patina binary: %w", err)
	}
	defer func() {
		_ = d.api.ContainerRemove(context.WithoutCancel(ctx), created.ID, container.RemoveOptions{Force: true})
	}()
	t0 := time.Now()
	err = v.check(ctx, d, created.ID)
	var bad *agentMismatch
	switch {
	case err == nil:
		v.ready.Store(true)
		d.log.Debug("verified the agent volume", "volume", v.name, "bytes", v.size, "duration", time.Since(t0))
		return v.name, nil
	case !errors.As(err, &bad):
		return "", fmt.Errorf("check volume %s: %w", v.name, err)
	case bad.missing:
		d.log.Info("filling the agent volume", "volume", v.name)
	default:
		d.log.Warn("the agent volume does not hold this patina binary: filling it again", "volume", v.name, "found", bad.why)
	}
	// Sidecars starting at once on a fresh engine fill it at the same
	// moment: each writes the same bytes, but a check may read the file
	// while another is rewriting it (seen with three sidecars: "11369984
	// bytes, not 26444951"). So a failed check waits a little (jittered,
	// longer each time), looks again without writing, and only then fills
	// anew, fillAttempts times at most.
	for attempt := 0; ; attempt++ {
		t0 = time.Now()
		if err := v.fill(ctx, d, created.ID); err != nil {
			return "", err
		}
		err = v.check(ctx, d, created.ID)
		if err == nil {
			break
		}
		if !errors.As(err, &bad) {
			return "", fmt.Errorf("check volume %s: %w", v.name, err)
		}
		if attempt == fillAttempts-1 {
			return "", fmt.Errorf("%w: volume %s still does not hold this patina binary after it was filled %d times (%s): remove it (docker volume rm %s) once no container uses it", ErrAgentBinary, v.name, fillAttempts, bad.why, v.name)
		}
		wait := time.Duration(attempt+1) * (fillRetryWait + rand.N(fillRetryWait))
		d.log.Debug("the agent volume changed under its check (another sidecar filling it?): looking again", "volume", v.name, "found", bad.why, "wait", wait)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return "", fmt.Errorf("check volume %s: %w", v.name, ctx.Err())
		}
		if err = v.check(ctx, d, created.ID); err == nil {
			break
		}
	}
	v.ready.Store(true)
	d.log.Info("shipped the patina binary to the engine and verified it", "volume", v.name, "bytes", v.size, "duration", time.Since(t0))
	v.prune(ctx, d)
	return v.name, nil
}

// agentMount mounts the agent volume at target: NoCopy always, so that
// nothing of the container's image is ever copied into it.
func agentMount(name, target string, readOnly bool) mount.Mount {
	return mount.Mount{Type: mount.TypeVolume, Source: name, Target: target, ReadOnly: readOnly,
		VolumeOptions: &mount.VolumeOptions{NoCopy: true}}
}

// agentMismatch: the volume's file is not this binary (why says how).
type agentMismatch struct {
	why     string
	missing bool
}

func (e *agentMismatch) Error() string { return e.why }

// check reads the volume's file back through the engine (a tar of it,
// from the never-started container cid) and compares it with this binary:
// a regular file, mode 0755, the same size, the same sha256. It reads at
// most the binary's size of content.
func (v *agentVolume) check(ctx context.Context, d *Docker, cid string) error {
	rc, _, err := d.api.CopyFromContainer(ctx, cid, agentFillDir+"/patina")
	if errdefs.IsNotFound(err) {
		return &agentMismatch{why: "no file", missing: true}
	}
	if err != nil {
		return err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	hdr, err := tr.Next()
	if err != nil {
		return fmt.Errorf("read the volume's file: %w", err)
	}
	switch {
	case hdr.Typeflag != tar.TypeReg:
		return &agentMismatch{why: fmt.Sprintf("not a regular file (type %q)", hdr.Typeflag)}
	case hdr.Size != v.size:
		return &agentMismatch{why: fmt.Sprintf("%d bytes, not %d", hdr.Size, v.size)}
	case hdr.Mode&0o7777 != 0o755:
		return &agentMismatch{why: fmt.Sprintf("mode %o, not 755", hdr.Mode&0o7777)}
	}
	h := sha256.New()
	if _, err := io.CopyN(h, tr, v.size); err != nil {
		return fmt.Errorf("read the volume's file: %w", err)
	}
	if !bytes.Equal(h.Sum(nil), v.sum[:]) {
		return &agentMismatch{why: "another file of the same size (its sha256 differs)"}
	}
	return nil
}

// fill writes this binary into the volume, replacing whatever is at its
// path (a file, a link, a directory).
func (v *agentVolume) fill(ctx context.Context, d *Docker, cid string) error {
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		hdr := &tar.Header{Name: "patina", Mode: 0o755, Size: v.size, ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}
		err := tw.WriteHeader(hdr)
		if err == nil {
			_, err = io.Copy(tw, v.binary())
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	err := d.api.CopyToContainer(ctx, cid, agentFillDir, pr, container.CopyToContainerOptions{AllowOverwriteDirWithFile: true})
	pr.Close()
	if err != nil {
		return fmt.Errorf("copy the patina binary into volume %s: %w", v.name, err)
	}
	return nil
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

// AgentStart: engine.AgentStart.
type AgentStart = engine.AgentStart

// agentTokenEnv carries an agent's token (wire.TokenEnv).
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
	if err := d.agent.verified(ctx, d); err != nil {
		return err
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

// agentSocket is the agent's abstract socket (wire.SocketName).
const agentSocket = "@patina-agent"

// dialExec starts `patina agent relay` in the container and speaks through
// its standard input and output.
func (d *Docker) dialExec(ctx context.Context, containerID string) (net.Conn, error) {
	if err := d.agent.verified(ctx, d); err != nil {
		return nil, err
	}
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
