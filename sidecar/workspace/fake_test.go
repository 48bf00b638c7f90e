package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/session/sessiontest"
	"github.com/patina-dev/patina/sidecar/agent/inside"
	"github.com/patina-dev/patina/sidecar/agent/wire"
	"github.com/patina-dev/patina/sidecar/engine"
	"github.com/patina-dev/patina/sidecar/mux"
)

// fakeEngine stands in for Docker in the domain's unit tests: a
// "container" is a directory, and its agent is a real inside.Server run in
// this process (real bash sessions, real git) on an abstract socket of its
// own. What cannot run here is the container's isolation itself; the
// end-to-end tests in tests/ cover that against real Docker.
type fakeEngine struct {
	t    *testing.T
	root string
	seq  atomic.Int32

	mu         sync.Mutex
	containers map[string]*fakeContainer
	// blockInspect makes Inspect of these workspace ids wait for ctx;
	// blockStop makes Stop of them wait for ctx.
	blockInspect, blockStop map[string]bool
	// hostile makes StartAgent of these workspace ids start a fake agent
	// answering garbage.
	hostile map[string]bool
	starts  int
	// remote makes the engine say it is not on this host: repository
	// workspaces get their objects shipped, not mounted.
	remote bool
	// images are the images committed.
	images []string
	// createDelay makes each Create take this long (outside the lock);
	// creating and maxCreating count the creates under way.
	createDelay           time.Duration
	creating, maxCreating atomic.Int32
}

type fakeContainer struct {
	id, wsid string
	spec     engine.Spec
	dir      string // the container's files: workspace/ and state/
	running  bool
	agent    *fakeAgent
	procs    *sessiontest.Launcher // every process group started in it
}

type fakeAgent struct {
	srv    *inside.Server
	ln     net.Listener
	cancel context.CancelFunc
}

func newFakeEngine(t *testing.T) *fakeEngine {
	e := &fakeEngine{t: t, root: t.TempDir(), containers: map[string]*fakeContainer{}, blockInspect: map[string]bool{}, blockStop: map[string]bool{}, hostile: map[string]bool{}}
	t.Cleanup(func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, c := range e.containers {
			e.stopLocked(c, true)
		}
	})
	return e
}

func (e *fakeEngine) Local() bool { return !e.remote }

// Commit only records the image's name (a container's files outside its
// volumes are not kept here); forking needs a real engine (a copy in a
// helper container): tests/fork_test.go runs it against Docker.
func (e *fakeEngine) Commit(_ context.Context, id, _, ref string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, err := e.get(id); err != nil {
		return err
	}
	e.images = append(e.images, ref)
	return nil
}
func (e *fakeEngine) CopyVolumes(context.Context, engine.CopySpec) error {
	return errors.New("fake engine: no copy")
}
func (e *fakeEngine) RemoveImage(context.Context, string) error { return nil }

func (e *fakeEngine) Create(ctx context.Context, spec engine.Spec) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	n := e.creating.Add(1)
	defer e.creating.Add(-1)
	for {
		if m := e.maxCreating.Load(); n <= m || e.maxCreating.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(e.createDelay)
	e.mu.Lock()
	defer e.mu.Unlock()
	id := fmt.Sprintf("c%d-%s", e.seq.Add(1), spec.WorkspaceID)
	// Volumes outlive containers: keyed by workspace.
	dir := filepath.Join(e.root, spec.WorkspaceID)
	for _, d := range []string{"workspace", "state"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return "", err
		}
	}
	e.containers[id] = &fakeContainer{id: id, wsid: spec.WorkspaceID, spec: spec, dir: dir, running: true, procs: &sessiontest.Launcher{}}
	return id, nil
}

func (e *fakeEngine) get(id string) (*fakeContainer, error) {
	c, ok := e.containers[id]
	if !ok {
		return nil, fmt.Errorf("container %s: %w", id, engine.ErrNotFound)
	}
	return c, nil
}

func (e *fakeEngine) Start(ctx context.Context, id string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	c, err := e.get(id)
	if err != nil {
		return err
	}
	c.running = true
	return nil
}

// DiskSupport: the fake engine keeps no layers (its workspaces get no
// disks unless a test gives the Manager some).
func (e *fakeEngine) DiskSupport(context.Context) error {
	return fmt.Errorf("%w: the fake engine", engine.ErrDiskUnsupported)
}

func (e *fakeEngine) BindDisk(ctx context.Context, _, _ string) error { return e.DiskSupport(ctx) }

// stopLocked ends a container's agent and, with killShells, every process
// started in it (a container's processes die with it).
func (e *fakeEngine) stopLocked(c *fakeContainer, killShells bool) {
	if c.agent != nil {
		c.agent.cancel()
		c.agent.ln.Close()
		if c.agent.srv != nil {
			c.agent.srv.Close()
		}
		c.agent = nil
	}
	if killShells {
		c.procs.KillAll()
	}
	c.running = false
}

func (e *fakeEngine) Stop(ctx context.Context, id string, _ time.Duration) error {
	e.mu.Lock()
	c, err := e.get(id)
	block := err == nil && e.blockStop[c.wsid]
	e.mu.Unlock()
	if block {
		<-ctx.Done()
		return ctx.Err()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	c, err = e.get(id)
	if err != nil {
		return err
	}
	e.stopLocked(c, true)
	return nil
}

func (e *fakeEngine) Remove(ctx context.Context, id string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if c, ok := e.containers[id]; ok {
		e.stopLocked(c, true)
		delete(e.containers, id)
	}
	return nil
}

func (e *fakeEngine) RemoveVolumes(ctx context.Context, wsid string) error {
	return os.RemoveAll(filepath.Join(e.root, wsid))
}

func (e *fakeEngine) Inspect(ctx context.Context, id string) (engine.State, error) {
	e.mu.Lock()
	c, err := e.get(id)
	block := err == nil && e.blockInspect[c.wsid]
	running := err == nil && c.running
	e.mu.Unlock()
	if block {
		<-ctx.Done()
		return engine.State{}, ctx.Err()
	}
	if err != nil {
		return engine.State{}, err
	}
	return engine.State{ID: id, Running: running, Status: "running"}, nil
}

func (e *fakeEngine) List(ctx context.Context) ([]engine.Owned, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []engine.Owned
	for _, c := range e.containers {
		out = append(out, engine.Owned{ID: c.id, WorkspaceID: c.wsid, Running: c.running})
	}
	return out, nil
}

func (e *fakeEngine) Watch(ctx context.Context, fn func(string, string, string)) { <-ctx.Done() }

// socketName is a fake container's agent socket: abstract sockets are
// shared by every process of the network namespace, so the name holds this
// test process's pid (two runs of these tests at once, or a test whose
// workspace id is fixed, must not meet).
func socketName(cid string) string {
	return fmt.Sprintf("@patina-fake-engine-%d-%s", os.Getpid(), cid)
}

func (e *fakeEngine) StartAgent(ctx context.Context, cid string, a engine.AgentStart) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	c, err := e.get(cid)
	if err != nil {
		return err
	}
	if !c.running {
		return errors.New("container not running")
	}
	e.starts++
	if c.agent != nil { // takeover
		e.stopLocked(c, false)
		c.running = true
	}
	// The agent it replaces lets go of its socket as its Serve returns:
	// wait for that, as a real takeover does.
	ln, err := net.Listen("unix", socketName(cid))
	for deadline := time.Now().Add(10 * time.Second); errors.Is(err, syscall.EADDRINUSE) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		ln, err = net.Listen("unix", socketName(cid))
	}
	if err != nil {
		return err
	}
	actx, cancel := context.WithCancel(context.Background())
	if e.hostile[c.wsid] {
		go serveGarbage(actx, ln)
		c.agent = &fakeAgent{ln: ln, cancel: cancel, srv: nil}
		c.agent.srv, _ = inside.NewServer(actx, inside.ServerConfig{WorkspaceID: "x", Token: "x", StateDir: filepath.Join(c.dir, "hostile-state"), Workdir: filepath.Join(c.dir, "workspace")})
		return nil
	}
	workdir := filepath.Join(c.dir, "workspace")
	if c.spec.Files != "" {
		workdir = c.spec.Files
	}
	cfg := inside.ServerConfig{
		WorkspaceID:    a.WorkspaceID,
		Token:          a.Token,
		StateDir:       filepath.Join(c.dir, "state"),
		Workdir:        workdir,
		InterruptGrace: 200 * time.Millisecond,
		Launcher:       c.procs,
		Git:            remapGit{inside.WorkspaceGit(workdir, filepath.Join(c.dir, "state"), slog.New(slog.DiscardHandler)), c.spec},
	}
	srv, err := inside.NewServer(actx, cfg)
	// The agent of this workspace's previous container may still be
	// letting go of the sessions' directory (its Close runs on): wait for
	// it, as a new container's agent would find the old one gone.
	for deadline := time.Now().Add(10 * time.Second); errors.Is(err, session.ErrLocked) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		srv, err = inside.NewServer(actx, cfg)
	}
	if err != nil {
		ln.Close()
		cancel()
		return err
	}
	go srv.Serve(actx, ln)
	c.agent = &fakeAgent{srv: srv, ln: ln, cancel: cancel}
	return nil
}

// remapGit turns the container paths of the object directories into the
// host paths the fake "container" sees.
type remapGit struct {
	inside.Git
	spec engine.Spec
}

func (g remapGit) Init(ctx context.Context, req wire.GitInitRequest) error {
	for i, alt := range req.Alternates {
		for _, m := range g.spec.Mounts {
			if m.Target == alt {
				req.Alternates[i] = m.Source
			}
		}
	}
	return g.Git.Init(ctx, req)
}

func (e *fakeEngine) DialAgent(ctx context.Context, cid string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", socketName(cid))
}

// killAgent kills a workspace's agent the way kill -9 does: its
// connections drop, its shells live on.
func (e *fakeEngine) killAgent(wsid string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, c := range e.containers {
		if c.wsid == wsid && c.agent != nil {
			e.stopLocked(c, false)
			c.running = true
		}
	}
}

// removeBehindBack removes a workspace's container as `docker rm -f` would.
func (e *fakeEngine) removeBehindBack(wsid string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for id, c := range e.containers {
		if c.wsid == wsid {
			e.stopLocked(c, true)
			delete(e.containers, id)
		}
	}
}

// serveGarbage is a hostile agent: it says hello right, then answers every
// call with bytes that are not an answer.
func serveGarbage(ctx context.Context, ln net.Listener) {
	for {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			conn := mux.Server(nc, mux.Config{})
			defer conn.Close()
			for {
				st, err := conn.Accept(ctx)
				if err != nil {
					return
				}
				go func() {
					defer st.Close()
					if strings.Contains(string(st.Header()), `"hello"`) {
						var req wire.HelloRequest
						_ = req
						_, _ = st.WriteFinal([]byte(`{"r":{"workspace_id":"` + helloID(st.Header()) + `","protocol":1}}` + "\n"))
						return
					}
					_, _ = io.WriteString(st, "\x00garbage {not json\n")
					_ = st.CloseWrite()
				}()
			}
		}()
	}
}

// helloID pulls the workspace id out of a hello header.
func helloID(h []byte) string {
	s := string(h)
	i := strings.Index(s, `"workspace_id":"`)
	if i < 0 {
		return ""
	}
	s = s[i+len(`"workspace_id":"`):]
	if j := strings.IndexByte(s, '"'); j >= 0 {
		return s[:j]
	}
	return ""
}

// fakeImages has every image.
type fakeImages struct{}

func (fakeImages) Ensure(context.Context, string) error { return nil }

// container is a workspace's current fake container.
func (e *fakeEngine) container(t *testing.T, wsid string) *fakeContainer {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, c := range e.containers {
		if c.wsid == wsid {
			return c
		}
	}
	t.Fatalf("no container for workspace %s", wsid)
	return nil
}
