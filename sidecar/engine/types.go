package engine

// Mount is a bind mount of a host directory.
type Mount struct {
	Source, Target string
	ReadOnly       bool
}

// Spec describes a workspace's container.
type Spec struct {
	WorkspaceID string
	Name        string // workspace name (also the container's hostname)
	Repo        string
	Image       string
	Env         map[string]string
	MemoryMB    int64
	CPUs        float64
	PidsLimit   int64
	// Network is "none" (no network), or anything else: the sidecar's own
	// network, whose traffic its egress proxy and rules own.
	Network string
	// Files is the host directory mounted at /workspace; "" gives the
	// workspace a volume of its own.
	Files string
	// Disk is where the workspace's disk is mounted on the host
	// (sidecar/disk): its files, its state and its container's writable
	// layer are kept there (Files is then not used). "": no disk, volumes.
	Disk string
	// Mounts are further host directories (read-only object stores).
	Mounts []Mount
	// Placement are cluster placement constraints ("node.labels.gpu==1");
	// only an engine that places workspaces on nodes (Swarm) takes them.
	Placement []string
	// Agent says how the agent runs, for an engine that starts it with the
	// container (Swarm) rather than through StartAgent.
	Agent AgentStart
}

// State is what Inspect reports.
type State struct {
	ID      string
	Running bool
	Status  string // Docker's: created, running, exited, dead...
	Error   string
	Pid     int
	// Image is the id of the container's image.
	Image string
}

// Owned is a container patina created, found by its labels.
type Owned struct {
	ID          string
	WorkspaceID string
	Name        string
	Repo        string
	StateDir    string
	Running     bool
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

// CopySpec copies one workspace's volumes (its sessions' state and, for a
// scratch workspace, its files) or host directory into another's.
type CopySpec struct {
	From, To string // workspace ids
	// FromFiles and ToFiles are the workspaces' host directories at
	// /workspace; "" for a files volume.
	FromFiles, ToFiles string
	// Image runs the copy (any image: the copy is the read-only patina
	// binary of the agent volume).
	Image string
}
