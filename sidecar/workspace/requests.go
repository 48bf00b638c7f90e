package workspace

import (
	"fmt"

	"github.com/patina-dev/patina/sidecar/agent/wire"
	"github.com/patina-dev/patina/sidecar/template"
)

// CreateRequest asks Create for a workspace. Zero values take the
// sidecar's defaults; Manager checks it once (validateCreate), whichever
// adapter made it.
type CreateRequest struct {
	// Name names the workspace (and its branch patina/<name>); generated
	// when empty.
	Name string
	// Repo is an absolute path inside a git repository on the sidecar's
	// machine; the workspace is a branch + worktree of it. Empty: a
	// scratch workspace with an empty directory and no git.
	Repo string
	// Base is the ref the branch starts from (default: the repo's HEAD).
	Base string
	// Image is the container image (default Config.DefaultImage; for a
	// repository with a devcontainer.json, its template).
	Image string
	// Template names a template to start from, in place of an image.
	Template string
	// Dockerfile is a Dockerfile's path in Repo: the workspace starts from
	// its template (built once per content).
	Dockerfile string
	// Env is set in the container (and so in every session).
	Env map[string]string
	// SecretEnv is set in every session's environment but never in the
	// container's configuration, and its values are never shown.
	SecretEnv map[string]string
	// Secrets names the secrets (Config.Secrets) the workspace may use,
	// through the egress proxy; it never holds a value.
	Secrets []string
	// MemoryMB, CPUs and PidsLimit bound the container (0: the defaults).
	MemoryMB  int64
	CPUs      float64
	PidsLimit int64
	// DiskMB bounds everything the workspace writes, in MiB (0: the
	// default, Config.DefaultDiskMB).
	DiskMB int64
	// Network is the workspace's network policy (nil: open where policies
	// can be enforced, else none).
	Network *NetworkPolicy
	// IdleStop stops the workspace after this long without activity (a Go
	// duration from 1s to 720h); "0": never; empty: Config.IdleStop.
	IdleStop string
	// Placement are Swarm placement constraints; refused on a single
	// engine.
	Placement []string

	// templateImage is the id of the template's image (set from the
	// template, never by a caller).
	templateImage string
}

// ForkRequest asks Fork for a new workspace from another.
type ForkRequest struct {
	// Name names the new workspace (and its branch patina/<name>);
	// generated when empty.
	Name string
	// KeepSecrets gives the fork the secrets its source holds (without
	// it, it holds none).
	KeepSecrets bool
	// Count makes this many forks at once (Forks; 0: one). With Name, they
	// are named <name>-1 ... <name>-N.
	Count int
}

// ForwardPortRequest asks ForwardPort to make a workspace's port
// reachable on the sidecar's host.
type ForwardPortRequest struct {
	// Port is the TCP port a server listens on inside the workspace.
	Port int
	// HostPort is the port to listen on on the sidecar's host (0: any
	// free one).
	HostPort int
}

// Validate is the one check of a forward request: a port inside, and a
// host port that can be (or 0).
func (req ForwardPortRequest) Validate() error {
	if err := wire.ValidPort(req.Port); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if req.HostPort < 0 || req.HostPort > 65535 {
		return fmt.Errorf("%w: host_port must be between 1 and 65535 (0: any free port), got %d", ErrInvalid, req.HostPort)
	}
	return nil
}

// BuildTemplateRequest asks BuildTemplate for a repository's template,
// made from its devcontainer.json (.devcontainer/devcontainer.json, else
// .devcontainer.json) or from a Dockerfile in it.
type BuildTemplateRequest struct {
	// Repo is a path inside a git repository on the sidecar's machine.
	Repo string
	// Base is the commit or ref whose files are used (default: HEAD).
	Base string
	// Dockerfile is a Dockerfile's path in the repository, built with its
	// directory as context, in place of a devcontainer.json.
	Dockerfile string
	// Name tags the template (default: dc- and 12 hex digits of the hash
	// of the content that made it).
	Name string
}

// Validate is the one check of a template request that needs no
// repository: a repo, and a name a template may have.
func (req BuildTemplateRequest) Validate() error {
	if req.Repo == "" {
		return fmt.Errorf("%w: repo is required: the repository whose devcontainer.json or Dockerfile makes the template", ErrInvalid)
	}
	if req.Name != "" {
		if err := template.ValidName(req.Name); err != nil {
			return err
		}
	}
	return nil
}

// SnapshotRequest asks Snapshot to save a workspace as a template.
type SnapshotRequest struct {
	// Name names the template (required; a template of that name must
	// not exist).
	Name string
}
