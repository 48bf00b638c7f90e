package template

import (
	"context"
	"io"
	"time"
)

// Image naming and labels.
const (
	// Repository is the image repository templates are tagged in:
	// patina-template:<name>.
	Repository = "patina-template"
	// LabelHash carries the hash of the content that made a template.
	LabelHash = "dev.patina.template.hash"
	// LabelSpec carries the template's spec (JSON: env, workspace folder,
	// ports, the repository, ignored properties).
	LabelSpec = "dev.patina.template.spec"
	// LabelBuild marks the containers and intermediate images of a build.
	LabelBuild = "dev.patina.template.build"
)

// Ref is the image reference of the template named name.
func Ref(name string) string { return Repository + ":" + name }

// Template is a built template.
type Template struct {
	Name string
	// Hash names the content that made it (devcontainer.json, the
	// Dockerfile, the build context's files, or the image).
	Hash string
	// Ref is its image reference (patina-template:<name>); ImageID the
	// image's id.
	Ref, ImageID string
	Spec
	Size      int64
	CreatedAt time.Time
	// Built says that this call built it (false: it existed).
	Built bool
}

// Spec is what a template gives a workspace besides its image.
type Spec struct {
	Repo            string            `json:"repo,omitempty"`
	Source          string            `json:"source,omitempty"` // the file it was made from
	Env             map[string]string `json:"env,omitempty"`
	WorkspaceFolder string            `json:"workspace_folder,omitempty"`
	ForwardPorts    []int             `json:"forward_ports,omitempty"`
	Ignored         []string          `json:"ignored,omitempty"`
	// Snapshot names the workspace the template was saved from (patina ws
	// snapshot): it holds that workspace's files and sessions, so a
	// workspace made from it has no repository of its own.
	Snapshot string `json:"snapshot,omitempty"`
}

// SnapshotSource is a workspace to save as a template: its container's
// filesystem (installed packages...), its files (/workspace) and its
// sessions' state (/.patina/state), which a workspace made from the
// template starts with.
type SnapshotSource struct {
	Name string
	// Workspace is its name, WorkspaceID its id, ContainerID its
	// container's.
	Workspace, WorkspaceID, ContainerID string
	// Env is the workspace's environment: the template's.
	Env map[string]string
	// Clear names variables of the container's environment not to keep in
	// the template (the agent's token).
	Clear []string
	// MaxBytes bounds what is copied of it into the engine's storage:
	// its container's changes (as the engine measures them: a sparse
	// file at its length), files and sessions' state (0: no bound).
	MaxBytes int64
}

// Source is what a template is made from, read by the caller from a
// repository at one commit.
type Source struct {
	// Name tags the template (default "dc-" and the first 12 hex digits
	// of its hash).
	Name string
	// Repo and File say where it came from (the record only).
	Repo, File string
	// Config is the parsed devcontainer.json (or, for a Dockerfile named on
	// create, a Config naming it); Raw its bytes (hashed).
	Config Devcontainer
	Raw    []byte
	// Dockerfile is the content of Config.Dockerfile; Context a tar archive
	// of Config.Context (names relative to it).
	Dockerfile []byte
	Context    []byte
	// LoadContext, when set, reads Context: the Manager calls it under its
	// semaphore of one preparation at a time, so that only one context is
	// held in memory however many creates build at once.
	LoadContext func(ctx context.Context) ([]byte, error)
	// BaseImageID is the id of Config.Image (a config without a build).
	BaseImageID string
	// Progress receives the build's and the create commands' output, line
	// by line (default: discarded).
	Progress io.Writer
}
