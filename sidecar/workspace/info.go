package workspace

import "time"

// Status is where a workspace is in its life.
type Status string

// Statuses of a workspace.
const (
	StatusRunning Status = "running"
	StatusStopped Status = "stopped"
	// StatusAdopting: a sidecar that just started is reconnecting to the
	// workspace; calls that need it wait a little for it (AdoptWait).
	StatusAdopting Status = "adopting"
)

// Info describes a workspace: what Create, Get, List, Start, Stop, Fork
// and SetNetwork return. It is a value: changing it changes nothing.
type Info struct {
	ID   string
	Name string
	// Branch is patina/<name> for a repository workspace, "" without one.
	Branch string
	// Worktree is the workspace's directory on the sidecar's machine,
	// mounted at /workspace in the container.
	Worktree string
	// Template is the template it was made from ("": none).
	Template   string
	Repo       string
	Base       string
	BaseCommit string
	Status     Status
	// Error says why a workspace is stopped when nobody stopped it (its
	// container died or was removed).
	Error string
	// Notice says something its owner should know (it was migrated, its
	// state note disagrees with the sidecar's record).
	Notice string
	// Agent describes the workspace's agent, the process inside its
	// container that runs its sessions (nil: it never had one here).
	Agent     *AgentInfo
	Image     string
	Network   NetworkPolicy
	MemoryMB  int64
	CPUs      float64
	PidsLimit int64
	// DiskMB is the size of its disk and DiskUsedMB how much of it is used
	// (0 and nil: no disk limit).
	DiskMB     int64
	DiskUsedMB *int64
	Env        map[string]string
	// SecretEnv are the names of its secret environment variables (never
	// their values), Secrets the names of the secrets it holds.
	SecretEnv   []string
	Secrets     []string
	ContainerID string
	CreatedAt   time.Time
	// Ports are its forwarded ports, by port.
	Ports []PortForward
	// ForkOf is the id of the workspace it was forked from, if it was.
	ForkOf string
	// IdleStop is how long it may be idle before it is stopped, as a Go
	// duration ("": never).
	IdleStop string
	// IdleStopped: it is stopped because it was idle (Error says for how
	// long), not because it failed; its next use starts it again.
	IdleStopped bool
	// IdlePaused: idle stop paused it (its processes kept; idle.go).
	IdlePaused bool
	// Placement are its placement constraints (--engine swarm).
	Placement []string
	// LastActivity is the time of its last recorded activity (nil: none
	// since the sidecar started).
	LastActivity *time.Time
}

// AgentInfo describes a workspace's agent.
type AgentInfo struct {
	// Connected says the sidecar holds a connection to it now.
	Connected bool
	PID       int
	Version   string
	StartedAt *time.Time
	// Restarts counts the times the sidecar started it again after it died
	// or stopped answering; LastRestart and LastRestartReason say when and
	// why the last time.
	Restarts          int
	LastRestart       *time.Time
	LastRestartReason string
	// Error says why it cannot be reached, if it cannot.
	Error string
}

// PortForward is a workspace port reachable on the sidecar's host.
type PortForward struct {
	// Port is the port inside the workspace.
	Port int
	// Address is where to connect on the sidecar's host (host:port), and
	// URL the same as an http:// URL.
	Address string
	URL     string
	// Connections is how many connections are open through it now.
	Connections int
	CreatedAt   time.Time
}
