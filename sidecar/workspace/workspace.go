package workspace

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/patina-dev/patina/sidecar/agent"
	"github.com/patina-dev/patina/sidecar/agent/wire"
	"github.com/patina-dev/patina/sidecar/disk"
	"github.com/patina-dev/patina/sidecar/engine"
	"github.com/patina-dev/patina/worktree"
)

// workspace is one workspace: its record, its repository (nil for a
// scratch workspace), the client of its agent.
type workspace struct {
	m   *Manager
	dir string // <state>/workspaces/<id>

	// life serialises lifecycle changes (start, stop, delete, git writes):
	// a one-slot channel, so waiting for it honours contexts.
	life chan struct{}
	// adopted is closed once adoption is over.
	adopted chan struct{}

	mu      sync.Mutex
	meta    meta
	repo    *worktree.Repo
	agent   *agent.Client
	status  Status
	why     string // why it is stopped, when nobody asked
	notice  string // something the owner should know
	deleted bool
	log     *eventLog
	ag      agentState
	watch   context.CancelFunc // stops watching the agent's connection
	fwd     map[int]*forward   // forwarded ports, by port inside
	// lastActive is the time of the last activity (unix ns), for idle stop.
	lastActive atomic.Int64
	// reaping: the idle reaper is looking at it (reapIdle).
	reaping atomic.Bool
	// tunnels counts the connections open through all of its forwards.
	tunnels atomic.Int32
	// reviewMu serialises reads and writes of review.json (review.go).
	reviewMu sync.Mutex
}

// agentState is what the API says of a workspace's agent.
type agentState struct {
	restarts   int
	recent     []time.Time // restarts in the last minute
	last       time.Time
	lastReason string
	err        string
	hello      wire.Hello
}

func newWorkspace(m *Manager, md meta) *workspace {
	w := &workspace{
		m:       m,
		dir:     filepath.Join(m.cfg.StateDir, "workspaces", md.ID),
		life:    make(chan struct{}, 1),
		adopted: make(chan struct{}),
		meta:    md,
	}
	w.touch()
	return w
}

// lock takes the lifecycle lock of a workspace that is not deleted.
func (w *workspace) lock(ctx context.Context) (unlock func(), err error) {
	select {
	case w.life <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("workspace %s is busy with another change: %w", w.name(), ctx.Err())
	}
	w.mu.Lock()
	deleted := w.deleted
	w.mu.Unlock()
	if deleted {
		<-w.life
		return nil, fmt.Errorf("%w: workspace %s was deleted", ErrNotFound, w.name())
	}
	return func() { <-w.life }, nil
}

func (w *workspace) name() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.meta.Name
}

func (w *workspace) id() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.meta.ID
}

// waitAdopted waits until the workspace's adoption is over.
func (w *workspace) waitAdopted(ctx context.Context, max time.Duration) error {
	select {
	case <-w.adopted:
		return nil
	default:
	}
	t := time.NewTimer(max)
	defer t.Stop()
	select {
	case <-w.adopted:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return fmt.Errorf("%w: workspace %s is still being adopted after %s; try again", ErrAdopting, w.name(), max)
	}
}

// runningErr is nil for a running workspace, else why not.
func (w *workspace) runningErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.deleted:
		return fmt.Errorf("%w: workspace %s was deleted", ErrNotFound, w.meta.Name)
	case w.status != StatusRunning || w.agent == nil:
		return w.stoppedErrLocked()
	}
	return nil
}

func (w *workspace) stoppedErrLocked() error {
	why := "by request"
	if w.why != "" {
		why = "because " + w.why
	}
	return fmt.Errorf("workspace %s is %w %s; POST /v1/workspaces/%s/start (or `patina ws start %s`) starts it again, keeping its files and its sessions' state",
		w.meta.Name, ErrStopped, why, w.meta.Name, w.meta.Name)
}

// client returns the agent client of a running workspace.
func (w *workspace) client() (*agent.Client, error) {
	if err := w.runningErr(); err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.agent, nil
}

// view is the workspace's API description.
func (w *workspace) view() Info {
	v := w.viewOfRecord()
	if v.DiskMB > 0 && w.m.cfg.Disks != nil {
		if u, err := w.m.cfg.Disks.Usage(v.ID); err == nil {
			v.DiskUsedMB = &u.UsedMB
		}
		v.Worktree = filepath.Join(w.m.cfg.Disks.Path(v.ID), disk.FilesDir)
	}
	return v
}

// viewOfRecord is the API description from what the sidecar holds.
func (w *workspace) viewOfRecord() Info {
	w.mu.Lock()
	defer w.mu.Unlock()
	md := w.meta
	v := Info{
		ID:          md.ID,
		Name:        md.Name,
		Branch:      md.Branch,
		Worktree:    md.Worktree,
		Repo:        md.Repo,
		Base:        md.Base,
		BaseCommit:  md.BaseCommit,
		Status:      w.status,
		Error:       w.why,
		Notice:      w.notice,
		Image:       md.Image,
		Template:    md.Template,
		Network:     policyInfo(md.policy()),
		MemoryMB:    md.MemoryMB,
		CPUs:        md.CPUs,
		PidsLimit:   md.PidsLimit,
		DiskMB:      md.DiskMB,
		Env:         md.Env,
		ContainerID: md.ContainerID,
		CreatedAt:   md.CreatedAt,
	}
	if w.agent != nil || w.ag.restarts > 0 || w.ag.err != "" {
		a := &AgentInfo{
			Connected: w.agent != nil && w.agent.Connected(),
			PID:       w.ag.hello.PID,
			Version:   w.ag.hello.Version,
			Restarts:  w.ag.restarts,
			Error:     w.ag.err,
		}
		if !w.ag.hello.StartedAt.IsZero() {
			t := w.ag.hello.StartedAt
			a.StartedAt = &t
		}
		if !w.ag.last.IsZero() {
			t := w.ag.last
			a.LastRestart = &t
			a.LastRestartReason = w.ag.lastReason
		}
		v.Agent = a
	}
	for _, f := range w.fwd {
		v.Ports = append(v.Ports, f.view())
	}
	v.ForkOf = md.ForkOf
	v.Placement = md.Placement
	v.SecretEnv = slices.Sorted(maps.Keys(md.SecretEnv))
	for _, g := range md.Secrets {
		v.Secrets = append(v.Secrets, g.Name)
	}
	if d := w.idleStopLocked(); d > 0 {
		v.IdleStop = d.String()
	}
	v.IdleStopped = md.IdleStopped && md.Stopped
	v.IdlePaused = md.IdlePaused && md.Stopped
	if ns := w.lastActive.Load(); ns > 0 {
		t := time.Unix(0, ns).UTC()
		v.LastActivity = &t
	}
	sort.Slice(v.Ports, func(i, j int) bool { return v.Ports[i].Port < v.Ports[j].Port })
	return v
}

// save writes workspace.json (and, for a repository workspace, the state
// note's meta, which is informational: never read back for a path).
func (w *workspace) save(ctx context.Context) error {
	w.mu.Lock()
	md, repo := w.meta, w.repo
	w.mu.Unlock()
	if err := writeJSONFile(filepath.Join(w.dir, metaFile), md); err != nil {
		return err
	}
	if repo != nil && md.Format == formatAgent {
		note := noteMeta{ID: md.ID, Name: md.Name, Image: md.Image, Network: md.Network, CreatedAt: md.CreatedAt}
		if b, err := jsonMarshal(note); err == nil {
			if _, err := repo.SetMeta(ctx, md.ID, b); err != nil {
				w.m.log.Warn("write the workspace's state note", "workspace_id", md.ID, "err", err)
			}
		}
	}
	return nil
}

const metaFile = "workspace.json"

// noteMeta is what the sidecar writes in a workspace's state note: for
// people reading the repository, never read back as a setting.
type noteMeta struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Image     string    `json:"image"`
	Network   string    `json:"network"`
	CreatedAt time.Time `json:"created_at"`
}

// markStopped records that the container is gone or dead without a stop
// request.
func (w *workspace) markStopped(why string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.meta.Stopped || w.deleted {
		return
	}
	// Docker reports "die" before "destroy": the later, more precise
	// reason wins.
	w.status = StatusStopped
	w.why = why
	w.m.log.Warn("workspace stopped behind patina's back", "workspace_id", w.meta.ID, "why", why)
}

// containerEvent reacts to the engine's events for the workspace's
// container.
func (w *workspace) containerEvent(action string) {
	switch action {
	case "die":
		w.markStopped("its container exited")
		// The engine may know more (a Swarm node that is down): asked
		// aside, so that the events of other workspaces do not wait.
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), inspectTimeout)
			defer cancel()
			if st, err := w.m.eng.Inspect(ctx, w.containerID()); err == nil && !st.Running && st.Error != "" {
				w.mu.Lock()
				if w.status == StatusStopped && w.why == "its container exited" {
					w.why = exitedWhy(st)
				}
				w.mu.Unlock()
			}
		}()
	case "destroy":
		w.markStopped("its container was removed outside patina")
	}
}

// exitedWhy says why a container that is not running stopped.
func exitedWhy(st engine.State) string {
	if st.Error == "" {
		return "its container exited"
	}
	return "its container exited: " + st.Error
}

// explain turns an agent that cannot be reached into "stopped" when the
// reason is that its container is gone or dead: the error then says how to
// recover. Other errors pass unchanged.
func (w *workspace) explain(err error) error {
	if err == nil || !errors.Is(err, agent.ErrUnavailable) {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), inspectTimeout)
	defer cancel()
	st, ierr := w.m.eng.Inspect(ctx, w.containerID())
	switch {
	case errors.Is(ierr, engine.ErrNotFound):
		w.markStopped("its container was removed outside patina")
	case ierr == nil && !st.Running:
		w.markStopped(exitedWhy(st))
	default:
		w.mu.Lock()
		w.ag.err = err.Error()
		w.mu.Unlock()
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stoppedErrLocked()
}

func (w *workspace) containerID() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.meta.ContainerID
}

// newAgentClient makes the client of the workspace's agent, in its current
// container. Called with w.mu held.
func (w *workspace) newAgentClient() *agent.Client {
	id, token := w.meta.ID, w.meta.AgentToken
	return agent.NewClient(agent.ClientConfig{
		WorkspaceID: id,
		Token:       token,
		Dial:        func(ctx context.Context) (net.Conn, error) { return w.m.eng.DialAgent(ctx, w.containerID()) },
		Recover:     w.recoverAgent,
		Setup:       w.agentSetup,
		OutputLimit: w.m.cfg.OutputLimit,
		Budget:      w.m.cfg.Budget,
		OldAgent:    w.meta.AgentProtocol < wire.ProtocolVersion,
		Logger:      w.m.cfg.Logger,
	})
}

// startAgent starts the agent in a (re)started container and waits until
// it answers.
func (w *workspace) startAgent(ctx context.Context) error {
	w.mu.Lock()
	c, id, token := w.agent, w.meta.ID, w.meta.AgentToken
	w.mu.Unlock()
	start := engine.AgentStart{WorkspaceID: id, Token: token, Takeover: true, Args: w.agentArgs(), Boot: true}
	if err := w.m.eng.StartAgent(ctx, w.containerID(), start); err != nil {
		return fmt.Errorf("start the workspace's agent: %w", err)
	}
	h, err := c.ConnectWait(ctx, min(w.m.cfg.AgentStartTimeout, agentAnswerWait))
	if err != nil && ctx.Err() == nil {
		// The agent the container's init started (or the one started
		// above) did not answer: start one the usual way, once.
		w.m.log.Warn("the workspace's agent did not answer; starting it again", "workspace_id", id, "err", err)
		start.Boot = false
		if err := w.m.eng.StartAgent(ctx, w.containerID(), start); err != nil {
			return fmt.Errorf("start the workspace's agent: %w", err)
		}
		h, err = c.ConnectWait(ctx, w.m.cfg.AgentStartTimeout)
	}
	if err != nil {
		return fmt.Errorf("the workspace's agent did not answer: %w", err)
	}
	w.agentAnswered(c, h)
	return nil
}

// agentAnswered records the hello of the agent c reached, and watches its
// connection.
func (w *workspace) agentAnswered(c *agent.Client, h wire.Hello) {
	w.mu.Lock()
	w.ag.hello, w.ag.err = h, ""
	w.mu.Unlock()
	w.watchAgent(c)
}

// thawedAgentWait bounds reaching the agent of a workspace just thawed
// (it answers at once; else a new one is started, as at any start).
const thawedAgentWait = 2 * time.Second

// reconnectAgent reaches the agent already running in the workspace (one
// idle stop paused, thawed); false: it did not answer.
func (w *workspace) reconnectAgent(ctx context.Context) bool {
	w.mu.Lock()
	c := w.agent
	w.mu.Unlock()
	h, err := c.ConnectWait(ctx, thawedAgentWait)
	if err != nil {
		w.m.log.Warn("resume: the thawed workspace's agent did not answer; starting one", "workspace_id", w.id(), "err", err)
		return false
	}
	w.agentAnswered(c, h)
	return true
}

// agentArgs are the flags of the workspace's agent.
func (w *workspace) agentArgs() []string {
	a := w.m.cfg.GitAuthor
	return []string{"--git-name", a.Name, "--git-email", a.Email}
}

// recoverAgent starts the agent again when it cannot be reached (it was
// killed, or something else holds its socket): the client calls it before
// retrying. It refuses when the container is not running, and when the
// agent keeps failing (more than 5 restarts in a minute).
func (w *workspace) recoverAgent(ctx context.Context, cause error) error {
	cid := w.containerID()
	st, err := w.m.eng.Inspect(ctx, cid)
	switch {
	case errors.Is(err, engine.ErrNotFound):
		w.markStopped("its container was removed outside patina")
		return fmt.Errorf("the container is gone")
	case err != nil:
		return err
	case !st.Running:
		w.markStopped(exitedWhy(st))
		return fmt.Errorf("the container is not running")
	}
	now := time.Now()
	w.mu.Lock()
	recent := w.ag.recent[:0]
	for _, t := range w.ag.recent {
		if now.Sub(t) < agentFailWindow {
			recent = append(recent, t)
		}
	}
	w.ag.recent = recent
	if len(recent) >= agentFailLimit {
		w.ag.err = fmt.Sprintf("the agent failed %d times in a minute; last: %v", len(recent), cause) // agentFailWindow
		msg := w.ag.err
		w.mu.Unlock()
		return errors.New(msg)
	}
	w.ag.recent = append(w.ag.recent, now)
	w.ag.restarts++
	w.ag.last = now.UTC()
	w.ag.lastReason = cause.Error()
	id, token, l := w.meta.ID, w.meta.AgentToken, w.log
	w.mu.Unlock()
	w.m.log.Warn("restarting the workspace's agent", "workspace_id", id, "cause", cause)
	if l != nil {
		l.add(worktree.Event{Kind: "agent-restarted", Message: cause.Error()})
	}
	return w.m.eng.StartAgent(ctx, cid, engine.AgentStart{WorkspaceID: id, Token: token, Takeover: true, Args: w.agentArgs()})
}

// watchAgent reconnects soon after the agent's connection breaks, so an
// agent that died is started again (and the API says so) even while no
// call is made.
func (w *workspace) watchAgent(c *agent.Client) {
	ctx, cancel := context.WithCancel(w.m.bg)
	w.mu.Lock()
	if w.watch != nil {
		w.watch()
	}
	w.watch = cancel
	w.mu.Unlock()
	go func() {
		for {
			done := c.Done()
			if done == nil {
				return
			}
			select {
			case <-done:
			case <-ctx.Done():
				return
			}
			select {
			case <-time.After(reconnectPause):
			case <-ctx.Done():
				return
			}
			if w.runningErr() != nil {
				return
			}
			cctx, ccancel := context.WithTimeout(ctx, reconnectTimeout)
			h, err := c.Connect(cctx)
			ccancel()
			w.mu.Lock()
			if err == nil {
				w.ag.hello, w.ag.err = h, ""
			} else {
				w.ag.err = err.Error()
			}
			w.mu.Unlock()
			if err != nil {
				_ = w.explain(err)
				return
			}
		}
	}()
}

// release lets go of the agent (Close of the Manager) without stopping
// anything.
func (w *workspace) release() {
	w.closeForwards()
	w.mu.Lock()
	c, l, watch := w.agent, w.log, w.watch
	w.watch = nil
	w.mu.Unlock()
	if watch != nil {
		watch()
	}
	if c != nil {
		c.Close()
	}
	if l != nil {
		l.close()
	}
}

// sink is where the workspace's events go.
func (w *workspace) sink() logSink {
	if w.repo != nil {
		return noteSink{repo: w.repo, id: w.meta.ID}
	}
	return fileSink{path: filepath.Join(w.dir, "log.jsonl")}
}

// A workspace's waits on its container and agent, each with its reason.
const (
	// inspectTimeout bounds asking the engine about a container that
	// died or an agent that failed (aside from the call that noticed).
	inspectTimeout = 5 * time.Second
	// agentAnswerWait: an agent answers within tens of ms of its start;
	// after a few seconds it will not (AgentStartTimeout, if shorter,
	// wins).
	agentAnswerWait = 5 * time.Second
	// agentFailLimit failures within agentFailWindow and the agent is not
	// restarted again: it is failing, and restarting it would spin.
	agentFailLimit  = 5
	agentFailWindow = time.Minute
	// reconnectPause is the pause before reconnecting to an agent whose
	// connection dropped (it is restarting: give it a moment);
	// reconnectTimeout bounds the reconnection.
	reconnectPause   = 200 * time.Millisecond
	reconnectTimeout = time.Minute
	// adoptTimeout bounds reconnecting to one workspace of a previous run
	// (inspect, agent restart if need be, hello); AdoptWait is how long a
	// call waits for it.
	adoptTimeout = time.Minute
	// agentQueryTimeout bounds a background question to an agent (its
	// sessions, for the idle reaper and the stopped workspace's cache).
	agentQueryTimeout = 10 * time.Second
	// eventWriteTimeout bounds writing a batch of the event log to the
	// repository's notes (git, on the host).
	eventWriteTimeout = 30 * time.Second
	// defaultIdleCheck is how often the idle reaper looks at workspaces
	// (Config.IdleCheck).
	defaultIdleCheck = 10 * time.Second
	// acceptRetryPause: a port forward's listener that failed to accept
	// (EMFILE and the like) waits this rather than spin.
	acceptRetryPause = 50 * time.Millisecond
)
