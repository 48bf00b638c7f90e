// Build, test and ship patina, the workspace sidecar for AI coding agents.
//
// The functions build the patina binary reproducibly (pinned Go image,
// CGO_ENABLED=0, -trimpath, version stamped), package it as a sidecar image,
// and run the project's vet, lint and tests, with a Docker engine for the
// integration tests. What each function runs is defined in
// internal/pipeline, which is unit-tested without an engine; this file only
// turns it into Dagger calls.
//
// Workspace drives a running patina sidecar (`patina serve` on the host,
// reached with --sidecar tcp://localhost:7070 --token env:PATINA_TOKEN):
// create, list, exec, diff, commit, merge and delete workspaces. What those
// functions do is in internal/wsglue, tested against a real sidecar; here
// they only resolve the service's endpoint and the token secret.
package main

import (
	"context"
	"fmt"

	"github.com/patina-dev/patina/internal/dagger"
	"github.com/patina-dev/patina/internal/pipeline"
	"github.com/patina-dev/patina/internal/wsglue"
)

// Patina is the patina project: its source and the functions on it.
type Patina struct {
	// The project's source tree.
	Source *dagger.Directory
}

// New selects the source tree the functions work on.
func New(
	// The patina repository. Defaults to the directory holding dagger.json,
	// without .git, a root-level patina binary and test binaries.
	// +defaultPath="/"
	// +ignore=[".git", "patina", "**/*.test", "**/*.out", "**/.DS_Store"]
	source *dagger.Directory,
) *Patina {
	return &Patina{Source: source}
}

// Build compiles the patina binary reproducibly: pinned Go image, static
// (CGO_ENABLED=0), -trimpath, no VCS stamp, the version set with -ldflags.
// The same source, platform and version give the same bytes.
func (m *Patina) Build(
	// Platform to build for, e.g. "linux/arm64" or "linux/arm/v7".
	// Default: the engine's platform.
	// +optional
	platform dagger.Platform,
	// Version stamped into the binary and printed by `patina version`.
	// Default: "dev".
	// +optional
	version string,
) (*dagger.File, error) {
	req := pipeline.BuildRequest{Platform: string(platform), Version: version}
	env, err := req.Env()
	if err != nil {
		return nil, err
	}
	cmd, err := req.Command()
	if err != nil {
		return nil, err
	}
	return withEnv(m.goContainer(), env).
		WithExec(cmd).
		File(pipeline.BinaryPath), nil
}

// BuildImage packages the sidecar in a minimal Debian image (git and
// debootstrap included) whose entrypoint is `patina serve --addr
// 0.0.0.0:7070`. The sidecar drives the Docker engine it is given: run the
// image with the host's socket mounted, e.g.
// `docker run -v /var/run/docker.sock:/var/run/docker.sock -p 7070:7070 IMAGE`.
func (m *Patina) BuildImage(
	// Platform of the image, e.g. "linux/arm64". Default: the engine's
	// platform.
	// +optional
	platform dagger.Platform,
	// Version stamped into the binary. Default: "dev".
	// +optional
	version string,
) (*dagger.Container, error) {
	bin, err := m.Build(platform, version)
	if err != nil {
		return nil, err
	}
	return dag.Container(dagger.ContainerOpts{Platform: platform}).
		From(pipeline.RuntimeImage).
		WithExec(pipeline.RuntimeInstall()).
		WithFile(pipeline.ImageBinaryPath, bin, dagger.ContainerWithFileOpts{Permissions: 0o755}).
		WithExposedPort(pipeline.SidecarPort).
		WithEntrypoint(pipeline.SidecarEntrypoint()), nil
}

// Test runs go vet and the test suite with the race detector. By default
// it runs `go test -short`, which leaves out tests that need Docker; with
// --integration it runs everything against a Docker engine started as a
// docker:dind service. A failing step fails the call with its output.
func (m *Patina) Test(
	ctx context.Context,
	// Run the integration tests too, against a Docker-in-Docker engine.
	// +optional
	integration bool,
) (string, error) {
	req := pipeline.TestRequest{Integration: integration}
	ctr := m.goContainer()
	if integration {
		ctr = withDocker(ctr)
	}
	ctr = withEnv(ctr, req.Env())
	return pipeline.Run(ctx, req.Steps(), &executor{ctr: ctr})
}

// Lint checks formatting (gofmt), runs go vet and checks that the
// committed Dagger generated code is current. It fails listing what is wrong.
func (m *Patina) Lint(ctx context.Context) (string, error) {
	return pipeline.Run(ctx, pipeline.LintSteps(), &executor{ctr: m.goContainer()})
}

// Workspace selects a running patina sidecar, and a workspace on it, for the
// functions that drive it: create, list, exec, diff, commit, merge, delete.
// Start the sidecar on the host first (`patina serve`, which listens on
// 127.0.0.1:7070); the engine tunnels --sidecar tcp://localhost:7070 to it.
func (m *Patina) Workspace(
	// The sidecar, as a host service: tcp://localhost:7070 reaches
	// `patina serve` listening on the host's loopback port 7070.
	sidecar *dagger.Service,
	// The sidecar's API token, e.g. env:PATINA_TOKEN: the token given to
	// `patina serve` (--token or PATINA_TOKEN), else the contents of its
	// <state-dir>/token (~/.local/state/patina/token by default).
	token *dagger.Secret,
	// The workspace to act on: create names the new workspace with it (the
	// sidecar picks a name when it is empty); exec, diff, commit, merge and
	// delete need it; list ignores it.
	// +optional
	name string,
) *PatinaWorkspace {
	return &PatinaWorkspace{Sidecar: sidecar, Token: token, Name: name}
}

// PatinaWorkspace is a workspace on a running patina sidecar: a container
// with persistent bash sessions and, when made from a repository, a git
// branch and worktree on the sidecar's machine.
type PatinaWorkspace struct {
	// The sidecar service.
	// +private
	Sidecar *dagger.Service
	// The sidecar's API token; read at call time, never stored in plain.
	// +private
	Token *dagger.Secret
	// The selected workspace's name (may be empty).
	// +private
	Name string
}

// Create creates the workspace named by --name and prints what it is
// (name, status, branch, base, worktree, image), one "key: value" line
// each, the name first. Without --repo it is a scratch workspace: an empty
// /workspace and no git.
func (w *PatinaWorkspace) Create(
	ctx context.Context,
	// An absolute path to a git repository ON THE SIDECAR'S MACHINE (the
	// host), e.g. --repo "$PWD"; it is not uploaded. The workspace is a new
	// branch patina/<name> of it, checked out in its own worktree.
	// +optional
	repo string,
	// The ref the workspace's branch starts from. Default: the
	// repository's HEAD. Needs --repo.
	// +optional
	base string,
) (string, error) {
	return call(ctx, w, wsglue.CreateRequest{Name: w.Name, Repo: repo, Base: base}, wsglue.Create)
}

// List prints the sidecar's workspaces, oldest first: a table (NAME,
// STATUS, BRANCH, REPO, CREATED), or with --format json the sidecar's JSON
// array. It ignores --name.
func (w *PatinaWorkspace) List(
	ctx context.Context,
	// Output format: "table" or "json".
	// +default="table"
	format string,
) (string, error) {
	return call(ctx, w, wsglue.ListRequest{Format: format}, wsglue.List)
}

// Exec runs a bash command line in a session of the workspace (a shell
// that persists between calls: cwd, exports and functions stay), waits for
// it and prints its stdout. A non-zero exit or a timeout fails the call
// with the exit code, the trimmed stderr and the tail of stdout, unless
// --allow-failure. The command runs in the workspace's container, in
// /workspace. Note that `exit` ends the session's shell: use `(exit 1)`,
// or --fresh to start the session again.
func (w *PatinaWorkspace) Exec(
	ctx context.Context,
	// The command line, run by bash, e.g. "go test ./...".
	cmd string,
	// The session to run in; one that does not exist is created.
	// +default="default"
	session string,
	// Stop the command after this many milliseconds. Default: no limit.
	// +optional
	timeoutMs int,
	// Print stdout and succeed even when the command exits non-zero or
	// times out.
	// +optional
	allowFailure bool,
	// Remove the session first (its shell state and history), so the
	// command runs in a new shell.
	// +optional
	fresh bool,
) (string, error) {
	return call(ctx, w, wsglue.ExecRequest{
		Workspace:    w.Name,
		Session:      session,
		Command:      cmd,
		TimeoutMS:    int64(timeoutMs),
		AllowFailure: allowFailure,
		Fresh:        fresh,
	}, wsglue.Exec)
}

// Diff prints the workspace's changes against its base (committed,
// uncommitted and untracked) as a unified diff that `git apply` takes;
// nothing when there are none.
func (w *PatinaWorkspace) Diff(ctx context.Context) (string, error) {
	return call(ctx, w, wsglue.DiffRequest{Workspace: w.Name}, wsglue.Diff)
}

// Commit stages everything in the workspace and commits it on its branch
// patina/<name>, printing the commit ("nothing to commit" is no failure).
func (w *PatinaWorkspace) Commit(
	ctx context.Context,
	// The commit message.
	message string,
) (string, error) {
	return call(ctx, w, wsglue.CommitRequest{Workspace: w.Name, Message: message}, wsglue.Commit)
}

// Merge merges the workspace's branch into a branch of the repository on
// the sidecar's machine and prints how (fast-forward, merge commit, up to
// date). Only committed changes are merged: commit first. A conflict fails
// and leaves both branches as they were.
func (w *PatinaWorkspace) Merge(
	ctx context.Context,
	// The branch to merge into. Default: the branch the workspace was
	// created from.
	// +optional
	into string,
) (string, error) {
	return call(ctx, w, wsglue.MergeRequest{Workspace: w.Name, Into: into}, wsglue.Merge)
}

// Delete removes the workspace: its container, sessions, worktree and
// (unless --keep-branch) its branch.
func (w *PatinaWorkspace) Delete(
	ctx context.Context,
	// Keep the workspace's git branch (and its notes).
	// +optional
	keepBranch bool,
) (string, error) {
	return call(ctx, w, wsglue.DeleteRequest{Workspace: w.Name, KeepBranch: keepBranch}, wsglue.Delete)
}

// call checks req, then connects to the sidecar and runs op: arguments
// that are wrong fail before the engine is asked for anything.
func call[R interface{ Validate() error }](
	ctx context.Context,
	w *PatinaWorkspace,
	req R,
	op func(context.Context, wsglue.API, R) (string, error),
) (string, error) {
	if err := req.Validate(); err != nil {
		return "", err
	}
	c, err := w.connect(ctx)
	if err != nil {
		return "", err
	}
	return op(ctx, c, req)
}

// connect resolves the sidecar's endpoint (starting the engine's tunnel to
// the host) and the token, at call time.
func (w *PatinaWorkspace) connect(ctx context.Context) (wsglue.API, error) {
	endpoint, err := w.Sidecar.Endpoint(ctx, dagger.ServiceEndpointOpts{Scheme: "http"})
	if err != nil {
		return nil, fmt.Errorf("reach the sidecar service (--sidecar): %w", err)
	}
	token, err := w.Token.Plaintext(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the token secret (--token): %w", err)
	}
	c, err := wsglue.Connect(endpoint, token)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// goContainer is the pinned Go image with the module and build caches and
// the source mounted at the working directory.
func (m *Patina) goContainer() *dagger.Container {
	return dag.Container().
		From(pipeline.GoImage).
		WithMountedCache(pipeline.GoModCachePath, dag.CacheVolume(pipeline.GoModCacheVolume)).
		WithMountedCache(pipeline.GoBuildCachePath, dag.CacheVolume(pipeline.GoBuildCacheVolume)).
		WithDirectory(pipeline.SourcePath, m.Source).
		WithWorkdir(pipeline.SourcePath)
}

// withDocker installs what the integration tests need and binds a
// docker:dind service. The service and ctr share a cache volume at the
// tests' TMPDIR, so that paths the tests bind-mount exist for the engine.
func withDocker(ctr *dagger.Container) *dagger.Container {
	tmp := dag.CacheVolume(pipeline.SharedTmpVolume)
	shared := dagger.ContainerWithMountedCacheOpts{Sharing: dagger.CacheSharingModeShared}
	dockerd := dag.Container().
		From(pipeline.DindImage).
		WithEnvVariable("DOCKER_TLS_CERTDIR", "").
		WithMountedCache(pipeline.DockerDataPath, dag.CacheVolume(pipeline.DockerDataVolume),
			dagger.ContainerWithMountedCacheOpts{Sharing: dagger.CacheSharingModePrivate}).
		WithMountedCache(pipeline.SharedTmpPath, tmp, shared).
		WithExposedPort(pipeline.DockerServicePort).
		AsService(dagger.ContainerAsServiceOpts{
			Args:                     pipeline.DockerdArgs(),
			InsecureRootCapabilities: true,
		})
	return ctr.
		WithExec(pipeline.IntegrationSetup()).
		WithMountedCache(pipeline.SharedTmpPath, tmp, shared).
		WithServiceBinding(pipeline.DockerServiceHost, dockerd)
}

func withEnv(ctr *dagger.Container, env []pipeline.EnvVar) *dagger.Container {
	for _, e := range env {
		ctr = ctr.WithEnvVariable(e.Name, e.Value)
	}
	return ctr
}

// executor runs pipeline steps as successive execs of one container.
type executor struct {
	ctr *dagger.Container
}

func (x *executor) Exec(ctx context.Context, step pipeline.Step) (pipeline.Outcome, error) {
	ctr := x.ctr.WithExec(step.Args, dagger.ContainerWithExecOpts{
		Expect:                   dagger.ReturnTypeAny,
		InsecureRootCapabilities: step.Privileged,
	})
	code, err := ctr.ExitCode(ctx)
	if err != nil {
		return pipeline.Outcome{}, fmt.Errorf("run %v: %w", step.Args, err)
	}
	stdout, err := ctr.Stdout(ctx)
	if err != nil {
		return pipeline.Outcome{}, fmt.Errorf("stdout of %v: %w", step.Args, err)
	}
	stderr, err := ctr.Stderr(ctx)
	if err != nil {
		return pipeline.Outcome{}, fmt.Errorf("stderr of %v: %w", step.Args, err)
	}
	x.ctr = ctr
	return pipeline.Outcome{Step: step, ExitCode: code, Stdout: stdout, Stderr: stderr}, nil
}
