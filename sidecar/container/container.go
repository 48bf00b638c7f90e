// Package container runs patina workspaces on a Docker engine: it creates
// their containers from a Spec (labels, limits, volumes, dropped
// capabilities, an isolated network), finds them again by label, ships the
// patina binary into them read-only, starts the agent inside, and connects
// to it — directly through the container's network namespace on a local
// engine, or through a `docker exec` relay on any engine.
//
// Nothing here reads or writes a path inside a container: the only host
// paths involved are the ones the sidecar chose (a repository workspace's
// worktree and the object stores of its base commit, mounted in).
package container

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/patina-dev/patina/sidecar/disk"
	"github.com/patina-dev/patina/sidecar/engine"
)

// Labels on everything patina owns (containers, volumes, its network).
const (
	LabelManaged   = "dev.patina.managed"   // "1"
	LabelWorkspace = "dev.patina.workspace" // workspace id
	LabelName      = "dev.patina.name"      // workspace name
	LabelRepo      = "dev.patina.repo"      // the user's repository, if any
	LabelStateDir  = "dev.patina.state-dir" // the sidecar's state directory
	LabelRole      = "dev.patina.role"      // volumes: state, files, agent
	// LabelAgentInit marks a container whose init (agent pause --once)
	// starts its first agent: the sidecar then does not docker exec one.
	LabelAgentInit = "dev.patina.agent-init" // "1"
)

// Paths inside a workspace's container.
const (
	Workdir     = "/workspace"
	AgentDir    = "/.patina/bin"
	AgentPath   = AgentDir + "/patina"
	StatePath   = "/.patina/state"
	RepoObjects = engine.RepoObjects
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
	CopyToContainer(ctx context.Context, containerID, dstPath string, content io.Reader, options container.CopyToContainerOptions) error
	CopyFromContainer(ctx context.Context, containerID, srcPath string) (io.ReadCloser, container.PathStat, error)
	VolumeCreate(ctx context.Context, options volume.CreateOptions) (volume.Volume, error)
	VolumeInspect(ctx context.Context, volumeID string) (volume.Volume, error)
	VolumeRemove(ctx context.Context, volumeID string, force bool) error
	NetworkCreate(ctx context.Context, name string, options network.CreateOptions) (network.CreateResponse, error)
	NetworkInspect(ctx context.Context, networkID string, options network.InspectOptions) (network.Inspect, error)
	NetworkList(ctx context.Context, options network.ListOptions) ([]network.Summary, error)
	NetworkRemove(ctx context.Context, networkID string) error
	NetworkConnect(ctx context.Context, networkID, containerID string, config *network.EndpointSettings) error
	NetworkDisconnect(ctx context.Context, networkID, containerID string, force bool) error
	Events(ctx context.Context, options events.ListOptions) (<-chan events.Message, <-chan error)
	DaemonHost() string
	ImageAPI
}

var _ API = (*client.Client)(nil)

// ErrNotFound: engine.ErrNotFound.
var ErrNotFound = engine.ErrNotFound

// Mount: engine.Mount.
type Mount = engine.Mount

// Spec: engine.Spec.
type Spec = engine.Spec

// Capabilities a workspace keeps, and why; every other one is dropped
// (Docker's defaults include MKNOD, SETFCAP, NET_RAW, FSETID, SETPCAP,
// SYS_CHROOT and AUDIT_WRITE): no device nodes, no file capabilities that
// would work on the host, no raw packets to other hosts on the network.
var Capabilities = []string{
	"CHOWN",            // package managers and builds chown what they install
	"DAC_OVERRIDE",     // root reads and writes files it does not own (a repository's files)
	"FOWNER",           // chmod/utime on files owned by others
	"KILL",             // signal processes of other users (stopping commands, killing daemons)
	"SETGID", "SETUID", // apt, su and servers drop privileges to other users
	"NET_BIND_SERVICE", // servers on ports below 1024
}

// ContainerName is the Docker name of a workspace's container.
func ContainerName(workspaceID string) string { return "patina-" + workspaceID }

// VolumeName is a workspace's volume for a role ("state", "files").
func VolumeName(workspaceID, role string) string { return "patina-" + workspaceID + "-" + role }

// validID checks a workspace id given to the engine on its own (a UUID, or
// 16 hex digits: letters, digits and '-', at most 64).
func validID(id string) error {
	ok := id != "" && len(id) <= 64
	for _, c := range id {
		ok = ok && (c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z')
	}
	if !ok {
		return fmt.Errorf("not a workspace id: %q", id)
	}
	return nil
}

// Config configures a Docker engine.
type Config struct {
	// StateDir labels what this sidecar owns.
	StateDir string
	// Binary is the patina binary shipped into containers (default:
	// patina-agent beside this process's executable when it fits, else the
	// executable; see defaultAgentBinary). Static runs in any image; a
	// dynamically linked one only where its libc is.
	Binary string
	// Version is the sidecar's: a patina-agent beside it of another
	// release is not shipped by default ("" or "dev": not compared).
	Version string
	// Transport reaches the agent: "netns" (through the container's network
	// namespace; the sidecar and the engine on one host), "exec" (a docker
	// exec relay; any engine), or "auto" (default: netns for a local engine
	// whose container pids are this process's to see, else exec).
	Transport string
	// Network is the bridge network workspaces join (default
	// "patina-<hash of StateDir>": each sidecar has its own, whose traffic
	// its egress proxy and firewall rules own); Bridge names its interface
	// on the host (default "pt<the same hash>"; "" for the network given,
	// Docker's br-<id>).
	Network string
	Bridge  string
	// SubnetPool is where the network's subnet is taken from (default
	// 10.213.0.0/16, a /22 per sidecar, chosen by the hash, the next free
	// one on a clash): Docker's own pools hold about thirty networks.
	SubnetPool netip.Prefix
	// Runtime is the OCI runtime the engine runs workspaces' containers
	// with (Docker's --runtime): "" the engine's default (runc), or
	// "runsc" (gVisor: a user-space kernel between the workspace and the
	// host's; it must be registered with the engine). Under runsc the
	// agent is reached by the exec transport.
	Runtime string
	Logger  *slog.Logger
}

// Docker runs workspaces on a Docker engine.
type Docker struct {
	api API
	cfg Config
	log *slog.Logger
	// dupNetworkAge is how old a duplicate of patina's network must be
	// before it is removed (findNetwork).
	dupNetworkAge time.Duration
	netMu         sync.Mutex // one ensureNetwork at a time in this process
	transport     string
	local         bool
	agent         agentVolume

	diskMu      sync.Mutex // DiskSupport's answer, asked once
	diskChecked bool
	diskErr     error
	diskSeen    atomic.Bool // the engine was seen to read a layer from a disk
	fillOnce    sync.Once
	fill        *ownImage
	fillErr     error
	foreign     sync.Map // agent volumes of other binaries noteForeignAgent logged
}

// New returns a Docker engine. The agent's binary is read once, here.
func New(api API, cfg Config) (*Docker, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Network == "" {
		h := sha256.Sum256([]byte(cfg.StateDir))
		tag := hex.EncodeToString(h[:5])
		cfg.Network, cfg.Bridge = "patina-"+tag, "pt"+tag
	}
	if !cfg.SubnetPool.IsValid() {
		cfg.SubnetPool = netip.MustParsePrefix("10.213.0.0/16")
	}
	if cfg.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find the patina binary to ship into workspaces: %w", err)
		}
		var passed error
		if cfg.Binary, passed, err = defaultAgentBinary(context.Background(), runtime.GOOS, runtime.GOARCH, exe, cfg.Version); err != nil {
			return nil, err
		}
		if passed != nil {
			cfg.Logger.Warn("the workspaces get the whole patina binary, not the patina-agent beside it", "why", passed)
		}
	}
	d := &Docker{api: api, cfg: cfg, log: cfg.Logger.With("component", "docker"), dupNetworkAge: time.Minute}
	d.local = localDaemon(api.DaemonHost())
	switch cfg.Transport {
	case "", "auto":
		d.transport = "exec"
		if d.local && runtime.GOOS == "linux" { // network namespaces are Linux's
			d.transport = "auto"
		}
	case "netns":
		if runtime.GOOS != "linux" {
			return nil, fmt.Errorf("agent transport netns needs Linux (its network namespaces): use exec")
		}
		d.transport = cfg.Transport
	case "exec":
		d.transport = cfg.Transport
	default:
		return nil, fmt.Errorf("agent transport must be auto, netns or exec, not %q", cfg.Transport)
	}
	t, err := transportFor(cfg.Runtime, d.transport)
	if err != nil {
		return nil, err
	}
	d.transport = t
	if err := d.agent.load(cfg.Binary); err != nil {
		return nil, err
	}
	d.log.Info("the workspaces' agent", "binary", cfg.Binary)
	if d.agent.dynamic {
		d.log.Warn("the patina binary is dynamically linked: its agent runs only in workspace images with a compatible glibc (the default image has one); build it static for any image: CGO_ENABLED=0 go build ./sidecar/cmd/patina", "binary", cfg.Binary)
	}
	return d, nil
}

// Local reports whether the engine runs on the sidecar's host, so host
// directories can be mounted into workspaces.
func (d *Docker) Local() bool { return d.local }

// Transport says how the agent is reached: "netns", "exec", or "auto"
// (netns for each container whose pid is visible here, else exec).
func (d *Docker) Transport() string { return d.transport }

// localDaemon reports whether the engine's address is a local socket.
func localDaemon(host string) bool {
	return host == "" || strings.HasPrefix(host, "unix://") || strings.HasPrefix(host, "npipe://")
}

// Create creates and starts a workspace's container: `patina agent pause`
// as PID 1 (an init that nothing inside can kill), the
// patina binary read-only at /.patina/bin, the state volume at
// /.patina/state, the files at /workspace, limits, the capabilities above,
// no-new-privileges, no Docker socket. It returns the container id.
func (d *Docker) Create(ctx context.Context, spec Spec) (string, error) {
	if err := validSpec(spec); err != nil {
		return "", err
	}
	id, err := d.create(ctx, spec)
	if err != nil && d.agent.replaced(ctx, d) {
		// Another sidecar pruned the agent volume between ensure and
		// create, and Docker made it anew, empty: fill it and try again.
		d.agent.invalidate()
		id, err = d.create(ctx, spec)
	}
	return id, err
}

func (d *Docker) create(ctx context.Context, spec Spec) (string, error) {
	agentVol, err := d.agent.ensure(ctx, d)
	if err != nil {
		return "", err
	}
	netMode := "none"
	if spec.Network != "none" {
		if netMode, err = d.ensureNetwork(ctx); err != nil {
			return "", err
		}
	}
	labels := d.labels(spec.WorkspaceID)
	mounts := []mount.Mount{
		agentMount(agentVol, AgentDir, true),
	}
	switch {
	case spec.Disk != "":
		mounts = append(mounts,
			mount.Mount{Type: mount.TypeBind, Source: filepath.Join(spec.Disk, "state"), Target: StatePath},
			mount.Mount{Type: mount.TypeBind, Source: filepath.Join(spec.Disk, "files"), Target: Workdir})
	default:
		stateVol, err := d.ensureVolume(ctx, spec.WorkspaceID, "state")
		if err != nil {
			return "", err
		}
		mounts = append(mounts, mount.Mount{Type: mount.TypeVolume, Source: stateVol, Target: StatePath})
	}
	switch {
	case spec.Disk != "":
	case spec.Files != "":
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: spec.Files, Target: Workdir})
	default:
		filesVol, err := d.ensureVolume(ctx, spec.WorkspaceID, "files")
		if err != nil {
			return "", err
		}
		mounts = append(mounts, mount.Mount{Type: mount.TypeVolume, Source: filesVol, Target: Workdir})
	}
	for _, m := range spec.Mounts {
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly})
	}
	env := make([]string, 0, len(spec.Env)+4)
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		env = append(env, k+"="+spec.Env[k])
	}
	// The worktree is owned by the sidecar's user, maybe not the
	// container's: git must not refuse it.
	env = append(env, "PATINA_WORKSPACE="+spec.WorkspaceID,
		"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=safe.directory", "GIT_CONFIG_VALUE_0=*")
	hostname := spec.Name
	if len(hostname) > 63 {
		hostname = hostname[:63]
	}
	pids := spec.PidsLimit
	ctrLabels := maps.Clone(labels)
	ctrLabels[LabelName] = spec.Name
	ctrLabels[LabelRepo] = spec.Repo
	entry := []string{AgentPath, "agent", "pause"}
	if a := spec.Agent; a.WorkspaceID != "" {
		// The init starts the first agent as the container starts (each
		// time it starts): a docker exec would cost 0.1 s more. Its token
		// is in the container's environment: the init takes it out of its
		// /proc/1/environ at once and hands it to the agent alone (see
		// agent.takeSecretEnv).
		entry = initCommand(a)
		env = append(env, agentTokenEnv+"="+a.Token)
		ctrLabels[LabelAgentInit] = "1"
	}
	cfg := &container.Config{
		Image:      spec.Image,
		User:       "0", // the agent runs as root whatever the image's USER (as StartAgent's exec)
		Entrypoint: entry,
		Cmd:        []string{},
		Env:        env,
		WorkingDir: Workdir,
		Hostname:   hostname,
		Labels:     ctrLabels,
	}
	host := &container.HostConfig{
		Runtime:     d.cfg.Runtime,
		Mounts:      mounts,
		NetworkMode: container.NetworkMode(netMode),
		SecurityOpt: []string{"no-new-privileges"},
		CapDrop:     []string{"ALL"},
		CapAdd:      Capabilities,
		// No IPv6 inside: the host's rules refuse it anyway, and a
		// workspace reaches IPv6 servers by name, through the proxy.
		Sysctls: map[string]string{"net.ipv6.conf.all.disable_ipv6": "1", "net.ipv6.conf.default.disable_ipv6": "1"},
		Resources: container.Resources{
			Memory:    spec.MemoryMB << 20,
			NanoCPUs:  int64(spec.CPUs * 1e9),
			PidsLimit: &pids,
		},
	}
	resp, err := d.api.ContainerCreate(ctx, cfg, host, nil, nil, ContainerName(spec.WorkspaceID))
	if err != nil {
		return "", fmt.Errorf("create container for workspace %s: %w", spec.WorkspaceID, err)
	}
	if spec.Disk != "" {
		if err := d.BindDisk(ctx, resp.ID, spec.Disk); err != nil {
			_ = d.api.ContainerRemove(context.WithoutCancel(ctx), resp.ID, container.RemoveOptions{Force: true})
			return "", err
		}
	}
	if err := d.api.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		_ = d.api.ContainerRemove(context.WithoutCancel(ctx), resp.ID, container.RemoveOptions{Force: true})
		return "", fmt.Errorf("start container for workspace %s: %w", spec.WorkspaceID, err)
	}
	return resp.ID, nil
}

// validSpec refuses numbers Docker would misread (a memory limit that
// overflows to "none", a CPU share that rounds to "none").
func validSpec(s Spec) error {
	switch {
	case s.MemoryMB < 6 || s.MemoryMB > 1<<30:
		return fmt.Errorf("memory %d MB out of range", s.MemoryMB)
	case s.CPUs < 0.01 || s.CPUs > 1024:
		return fmt.Errorf("cpus %g out of range", s.CPUs)
	case s.PidsLimit < 1 || s.PidsLimit > 1<<22:
		return fmt.Errorf("pids limit %d out of range", s.PidsLimit)
	}
	return nil
}

func (d *Docker) labels(workspaceID string) map[string]string {
	return map[string]string{
		LabelManaged:   "1",
		LabelWorkspace: workspaceID,
		LabelStateDir:  d.cfg.StateDir,
	}
}

// ensureVolume creates (or finds) a workspace's volume.
func (d *Docker) ensureVolume(ctx context.Context, workspaceID, role string) (string, error) {
	name := VolumeName(workspaceID, role)
	labels := d.labels(workspaceID)
	labels[LabelRole] = role
	v, err := d.api.VolumeCreate(ctx, volume.CreateOptions{Name: name, Driver: "local", Labels: labels})
	if err != nil {
		return "", fmt.Errorf("create volume %s: %w", name, err)
	}
	if v.Labels[LabelWorkspace] != workspaceID {
		return "", fmt.Errorf("volume %s exists and is not this workspace's", name)
	}
	return name, nil
}

// ensureNetwork creates patina's bridge network, with traffic between its
// containers turned off, unless it exists, and returns its id. Containers
// join it by id: an engine before API 1.44 does not keep network names
// unique, so two sidecars (or test processes) creating it at once can
// make two networks of the one name, after which the name is ambiguous.
// Every caller then picks the same one, the oldest, and removes the
// others while nothing is attached to them.
func (d *Docker) ensureNetwork(ctx context.Context) (string, error) {
	d.netMu.Lock()
	defer d.netMu.Unlock()
	if id, err := d.findNetwork(ctx); err != nil || id != "" {
		return id, err
	}
	if err := d.createNetwork(ctx); err != nil {
		return "", err
	}
	id, err := d.findNetwork(ctx)
	if err == nil && id == "" {
		err = fmt.Errorf("network %s: created, then not found", d.cfg.Network)
	}
	return id, err
}

// findNetwork returns the id of the network named d.cfg.Network ("" if
// there is none), after checking that it keeps containers apart. Of
// several networks of that name it takes the oldest (then the lowest id),
// and removes the others that patina made, once they are older than
// dupNetworkAge (a caller racing this one may have just picked one) and
// no container, running or stopped, is on them.
func (d *Docker) findNetwork(ctx context.Context) (string, error) {
	list, err := networksNamed(ctx, d.api, d.cfg.Network)
	if err != nil {
		return "", err
	}
	if len(list) == 0 {
		return "", nil
	}
	slices.SortFunc(list, func(a, b network.Summary) int {
		return cmp.Or(a.Created.Compare(b.Created), strings.Compare(a.ID, b.ID))
	})
	for _, dup := range list[1:] {
		if dup.Labels[LabelManaged] != "1" || time.Since(dup.Created) < d.dupNetworkAge {
			continue
		}
		if used, err := d.networkUsed(ctx, dup.ID); err != nil || used {
			continue
		}
		if err := d.api.NetworkRemove(ctx, dup.ID); err == nil {
			d.log.Info("removed a duplicate network", "network", d.cfg.Network, "id", short(dup.ID))
		}
	}
	n := list[0]
	if n.Options["com.docker.network.bridge.enable_icc"] != "false" {
		return "", fmt.Errorf("network %s exists but lets containers reach each other (enable_icc is not false): remove it, patina makes its own", d.cfg.Network)
	}
	return n.ID, nil
}

// networksNamed lists the networks named exactly name (the engine's name
// filter also matches parts of names).
func networksNamed(ctx context.Context, api API, name string) ([]network.Summary, error) {
	list, err := api.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("name", name))})
	if err != nil {
		return nil, fmt.Errorf("list networks named %s: %w", name, err)
	}
	return slices.DeleteFunc(list, func(n network.Summary) bool { return n.Name != name }), nil
}

// networkUsed reports whether any container, running or not, is on the
// network with id. A container that never ran names its network only as
// it was given (by name, or by id), so every container on a network of
// that name is looked at.
func (d *Docker) networkUsed(ctx context.Context, id string) (bool, error) {
	list, err := d.api.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("network", d.cfg.Network))})
	if err != nil {
		return false, err
	}
	for _, c := range list {
		if c.HostConfig.NetworkMode == id {
			return true, nil
		}
		if c.NetworkSettings == nil {
			continue
		}
		for _, ep := range c.NetworkSettings.Networks {
			if ep != nil && ep.NetworkID == id {
				return true, nil
			}
		}
	}
	return false, nil
}

// State: engine.State.
type State = engine.State

// Inspect returns a container's state; ErrNotFound when it is gone.
func (d *Docker) Inspect(ctx context.Context, id string) (State, error) {
	info, err := d.api.ContainerInspect(ctx, id)
	if errdefs.IsNotFound(err) {
		return State{}, fmt.Errorf("container %s: %w", short(id), ErrNotFound)
	}
	if err != nil {
		return State{}, err
	}
	st := State{ID: info.ID, Image: info.Image}
	if info.State != nil {
		st.Running = info.State.Running && !info.State.Paused
		st.Status = string(info.State.Status)
		st.Error = info.State.Error
		st.Pid = info.State.Pid
		if !info.State.Running && info.State.ExitCode != 0 {
			st.Error = strings.TrimSpace(st.Error + " exit code " + strconv.Itoa(info.State.ExitCode))
		}
		if info.State.OOMKilled {
			st.Error = strings.TrimSpace(st.Error + " (killed: out of memory)")
		}
	}
	return st, nil
}

// Start starts a stopped container, once the agent volume it runs from
// is verified.
func (d *Docker) Start(ctx context.Context, id string) error {
	if _, err := d.agent.ensure(ctx, d); err != nil {
		return err
	}
	d.noteForeignAgent(ctx, id)
	if d.unpause(ctx, id) {
		return nil
	}
	return containerErr(id, d.api.ContainerStart(ctx, id, container.StartOptions{}))
}

// pauseAPI is what of Docker's client pauses containers (left out of the
// client interface the package uses, which its fakes implement).
type pauseAPI interface {
	ContainerPause(ctx context.Context, containerID string) error
	ContainerUnpause(ctx context.Context, containerID string) error
}

func (d *Docker) pauseAPI() (pauseAPI, error) {
	p, ok := d.api.(pauseAPI)
	if !ok {
		return nil, fmt.Errorf("%w: this engine client cannot pause containers", errors.ErrUnsupported)
	}
	return p, nil
}

// unpause unpauses a paused container (a sidecar killed while it saved
// the workspace: ws snapshot pauses it); true: it runs now.
func (d *Docker) unpause(ctx context.Context, id string) bool {
	up, err := d.pauseAPI()
	if err != nil {
		return false
	}
	info, err := d.api.ContainerInspect(ctx, id)
	if err != nil || info.State == nil || !info.State.Paused {
		return false
	}
	if err := up.ContainerUnpause(ctx, id); err != nil {
		d.log.Warn("unpause a paused workspace container", "container", short(id), "err", err)
		return false
	}
	d.log.Info("unpaused a workspace container left paused", "container", short(id))
	return info.State.Running
}

// Pause freezes a running container (the cgroup freezer: its processes
// keep their memory and take no CPU): idle stop's first stage.
func (d *Docker) Pause(ctx context.Context, id string) error {
	p, err := d.pauseAPI()
	if err != nil {
		return err
	}
	return containerErr(id, p.ContainerPause(ctx, id))
}

// Unpause thaws a container Pause froze; one that runs already is left as
// it is (an error for one that does not run).
func (d *Docker) Unpause(ctx context.Context, id string) error {
	p, err := d.pauseAPI()
	if err != nil {
		return err
	}
	err = containerErr(id, p.ContainerUnpause(ctx, id))
	if err != nil && !errors.Is(err, ErrNotFound) {
		// Docker answers 500 for a container that is not paused: no error
		// if it runs.
		if info, ierr := d.api.ContainerInspect(ctx, id); ierr == nil && info.State != nil && info.State.Running && !info.State.Paused {
			return nil
		}
	}
	return err
}

// containerErr is an engine's answer about container id, its "no such
// container" said as ErrNotFound.
func containerErr(id string, err error) error {
	if errdefs.IsNotFound(err) {
		return fmt.Errorf("container %s: %w", short(id), ErrNotFound)
	}
	return err
}

// noteForeignAgent logs, once per volume, that a container made by
// another patina binary mounts that binary's agent volume: Docker cannot
// change a container's mounts, so it runs the agent it was made with,
// which this process neither filled nor checked (a volume filled by a
// patina before the agent volume was checked may hold what an image put
// there). Recreating the container (a fork, or removing it and starting
// the workspace) puts it on this binary's verified volume.
func (d *Docker) noteForeignAgent(ctx context.Context, id string) {
	info, err := d.api.ContainerInspect(ctx, id)
	if err != nil {
		return
	}
	for _, m := range info.Mounts {
		if m.Destination != AgentDir || m.Name == d.agent.name {
			continue
		}
		if _, seen := d.foreign.LoadOrStore(m.Name, true); !seen {
			d.log.Warn("a workspace's container was made by another patina binary and runs that binary's agent, unchecked by this sidecar: fork the workspace, or remove its container and start it, to run this one's",
				"container", short(id), "agent_volume", m.Name, "this_binary", d.agent.name)
		}
	}
}

// Stop stops a container (SIGTERM, then SIGKILL after timeout).
func (d *Docker) Stop(ctx context.Context, id string, timeout time.Duration) error {
	secs := int(timeout / time.Second)
	return containerErr(id, d.api.ContainerStop(ctx, id, container.StopOptions{Timeout: &secs}))
}

// Remove removes a container, running or not; a missing one is not an
// error. Its volumes stay (see RemoveVolumes).
func (d *Docker) Remove(ctx context.Context, id string) error {
	d.unbindDisk(ctx, id)
	err := d.api.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("remove container %s: %w", short(id), err)
	}
	return nil
}

// RemoveVolumes removes a workspace's volumes (its sessions and, for a
// scratch workspace, its files). Missing ones are not an error.
func (d *Docker) RemoveVolumes(ctx context.Context, workspaceID string) error {
	return RemoveVolumes(ctx, d.api, workspaceID)
}

// VolumeAPI is what RemoveVolumes needs of an engine.
type VolumeAPI interface {
	VolumeInspect(ctx context.Context, volumeID string) (volume.Volume, error)
	VolumeRemove(ctx context.Context, volumeID string, force bool) error
}

// RemoveVolumes removes a workspace's volumes on the engine api reaches
// (those that carry its label: a volume of that name that is not patina's
// is left). A missing volume is not an error.
func RemoveVolumes(ctx context.Context, api VolumeAPI, workspaceID string) error {
	if err := validID(workspaceID); err != nil {
		return err
	}
	var errs []error
	for _, role := range []string{"state", "files"} {
		name := VolumeName(workspaceID, role)
		v, err := api.VolumeInspect(ctx, name)
		if errdefs.IsNotFound(err) {
			continue
		}
		if err == nil && v.Labels[LabelWorkspace] != workspaceID {
			continue // not ours
		}
		if err := api.VolumeRemove(ctx, name, true); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove volume %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// Owned: engine.Owned.
type Owned = engine.Owned

// List finds every container patina owns (for this state directory).
func (d *Docker) List(ctx context.Context) ([]Owned, error) {
	return List(ctx, d.api, d.cfg.StateDir)
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
			Repo:        c.Labels[LabelRepo],
			StateDir:    c.Labels[LabelStateDir],
			Running:     c.State == container.StateRunning,
		})
	}
	return out, nil
}

// Cleanup removes a state directory's containers, volumes and disks (in
// the host's pool, disk.DefaultDir): tests and benchmarks clean up with it.
func Cleanup(ctx context.Context, api API, stateDir string) error {
	owned, err := List(ctx, api, stateDir)
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range owned {
		_ = unbindLayer(ctx, api, c.ID)
		if err := api.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	vl, ok := api.(interface {
		VolumeList(ctx context.Context, options volume.ListOptions) (volume.ListResponse, error)
	})
	if ok {
		f := filters.NewArgs(filters.Arg("label", LabelManaged+"=1"), filters.Arg("label", LabelStateDir+"="+stateDir))
		if vols, err := vl.VolumeList(ctx, volume.ListOptions{Filters: f}); err == nil {
			for _, v := range vols.Volumes {
				if err := api.VolumeRemove(ctx, v.Name, true); err != nil && !errdefs.IsNotFound(err) {
					errs = append(errs, err)
				}
			}
		}
	}
	if err := removeNetworks(ctx, api, stateDir); err != nil {
		errs = append(errs, err)
	}
	if stateDir != "" {
		if abs, err := filepath.Abs(stateDir); err == nil {
			errs = append(errs, disk.RemoveOwned(disk.DefaultDir, abs))
		}
	}
	return errors.Join(errs...)
}

// Watch calls fn with the workspace and container ids whenever one of this
// state directory's containers starts, dies or is destroyed, until ctx
// ends.
func (d *Docker) Watch(ctx context.Context, fn func(workspaceID, containerID, action string)) {
	f := filters.NewArgs(
		filters.Arg("type", string(events.ContainerEventType)),
		filters.Arg("label", LabelManaged+"=1"),
		filters.Arg("label", LabelStateDir+"="+d.cfg.StateDir),
		filters.Arg("event", string(events.ActionDie)),
		filters.Arg("event", string(events.ActionDestroy)),
		filters.Arg("event", string(events.ActionStart)),
	)
	for ctx.Err() == nil {
		msgs, errs := d.api.Events(ctx, events.ListOptions{Filters: f})
	loop:
		for {
			select {
			case m := <-msgs:
				fn(m.Actor.Attributes[LabelWorkspace], m.Actor.ID, string(m.Action))
			case <-errs:
				break loop
			case <-ctx.Done():
				return
			}
		}
		select { // the engine restarted or the stream broke: retry
		case <-time.After(eventsRetry):
		case <-ctx.Done():
		}
	}
}

// eventsRetry is the pause before the engine's event stream is asked for
// again after it broke (the engine restarted, say).
const eventsRetry = time.Second

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
