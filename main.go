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
// functions do is in internal/daggerws, tested against a real sidecar; here
// they only resolve the service's endpoint and the token secret.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/patina-dev/patina/internal/dagger"
	"github.com/patina-dev/patina/internal/daggerws"
	"github.com/patina-dev/patina/internal/pipeline"
	"github.com/patina-dev/patina/sidecar/client"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// Patina is the patina project: its source and the functions on it.
type Patina struct {
	// The project's source tree.
	Source *dagger.Directory
	// The image builds, tests and lint run in (--go-image).
	// +private
	GoImage string
	// The base of the sidecar image (--runtime-image).
	// +private
	RuntimeImage string
}

// New selects the source tree the functions work on, and the images they
// use. Each image defaults to a pinned tag@digest; an engine behind a
// registry mirror, or one without a registry, is given references it can
// resolve instead (a mirror's name, a local registry's digest).
func New(
	// The patina repository. Defaults to the directory holding dagger.json,
	// without .git, a root-level patina binary, test binaries and what
	// README's example calls export into it.
	// +defaultPath="/"
	// +ignore=[".git", "patina", "**/*.test", "**/*.out", "**/.DS_Store", "patina-arm64", "patina-fix-tests", "fix-tests-files", "fix-tests.patch"]
	source *dagger.Directory,
	// The Go toolchain image that build, test and lint run in: Debian-based,
	// with Go, git and bash (test --integration installs Docker's engine
	// and debootstrap in it with apt-get).
	// +default="golang:1.26.8-bookworm@sha256:a688600ca24f8a4d3ca77f95b0dd40704a9fc787c826660eb7ba0b641b8b175d"
	goImage string,
	// The base image of build-image (the sidecar image): Debian-based, as
	// packages are installed with apt-get.
	// +default="debian:bookworm-20260824-slim@sha256:88200866dfff7ea7f5cbcb6ec7c8a701889efe6fe859fe64d6990e4b07ea4171"
	runtimeImage string,
) *Patina {
	return &Patina{Source: source, GoImage: goImage, RuntimeImage: runtimeImage}
}

// images returns the images of this call: the constructor's arguments, or
// the pinned defaults where they are empty (Go callers, such as tests, do
// not get Dagger's +default values), checked.
func (m *Patina) images() (pipeline.Images, error) {
	imgs := pipeline.Images{Go: m.GoImage, Runtime: m.RuntimeImage}.WithDefaults()
	if err := imgs.Validate(); err != nil {
		return pipeline.Images{}, err
	}
	return imgs, nil
}

// Build compiles the patina binary reproducibly: pinned Go image, static
// (CGO_ENABLED=0), -trimpath, no VCS stamp, the version set with -ldflags.
// The same source, platform and version give the same bytes. It resolves
// the Go image first, so that one the engine cannot resolve fails naming
// --go-image.
func (m *Patina) Build(
	ctx context.Context,
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
	imgs, err := m.images()
	if err != nil {
		return nil, err
	}
	ctr, err := m.goContainer(ctx, imgs.Go)
	if err != nil {
		return nil, err
	}
	return withEnv(ctr, env).
		WithExec(cmd).
		File(pipeline.BinaryPath), nil
}

// BuildImage packages the sidecar in a minimal Debian image (git and
// debootstrap included) whose entrypoint is `patina serve --addr
// 0.0.0.0:7070`. The sidecar drives the Docker engine it is given: run the
// image with the host's socket mounted, e.g.
// `docker run -v /var/run/docker.sock:/var/run/docker.sock -p 7070:7070 IMAGE`.
func (m *Patina) BuildImage(
	ctx context.Context,
	// Platform of the image, e.g. "linux/arm64". Default: the engine's
	// platform.
	// +optional
	platform dagger.Platform,
	// Version stamped into the binary. Default: "dev".
	// +optional
	version string,
) (*dagger.Container, error) {
	// Arguments first: a bad one fails before the engine is asked anything.
	req := pipeline.BuildRequest{Platform: string(platform), Version: version}
	if _, err := req.Env(); err != nil {
		return nil, err
	}
	if _, err := req.Command(); err != nil {
		return nil, err
	}
	imgs, err := m.images()
	if err != nil {
		return nil, err
	}
	base, err := from(ctx, dag.Container(dagger.ContainerOpts{Platform: platform}), "--runtime-image", imgs.Runtime)
	if err != nil {
		return nil, err
	}
	bin, err := m.Build(ctx, platform, version)
	if err != nil {
		return nil, err
	}
	return base.
		WithExec(pipeline.RuntimeInstall()).
		WithFile(pipeline.ImageBinaryPath, bin, dagger.ContainerWithFileOpts{Permissions: 0o755}).
		WithExposedPort(pipeline.SidecarPort).
		WithEntrypoint(pipeline.SidecarEntrypoint()), nil
}

// Test runs go vet and the test suite with the race detector. By default
// it runs `go test -short`, which leaves out tests that need Docker; with
// --integration it runs everything, with a Docker engine (Debian's
// docker.io) started in the test container itself: the sidecar's tests
// need the engine on their own host, as on a developer's machine. A
// failing step fails the call with its output, and is not kept in the
// engine's cache: the next call runs the tests again.
func (m *Patina) Test(
	ctx context.Context,
	// Run the integration tests too, with a Docker engine started beside
	// them in the test container.
	// +optional
	integration bool,
) (string, error) {
	imgs, err := m.images()
	if err != nil {
		return "", err
	}
	req := pipeline.TestRequest{Integration: integration}
	ctr, err := m.goContainer(ctx, imgs.Go)
	if err != nil {
		return "", err
	}
	if integration {
		ctr = withDocker(ctr)
	}
	return pipeline.Run(ctx, req.Steps(), &executor{ctr: ctr})
}

// Lint checks formatting (gofmt), runs go vet and checks that the
// committed Dagger generated code is current. It fails listing what is wrong.
func (m *Patina) Lint(ctx context.Context) (string, error) {
	imgs, err := m.images()
	if err != nil {
		return "", err
	}
	ctr, err := m.goContainer(ctx, imgs.Go)
	if err != nil {
		return "", err
	}
	return pipeline.Run(ctx, pipeline.LintSteps(), &executor{ctr: ctr})
}

// Workspace selects a running patina sidecar, and a workspace on it, for the
// functions that drive it: create, list, exec, diff, commit, merge, delete.
// Start the sidecar on the host first (`patina serve`, which listens on
// 127.0.0.1:7070); the engine tunnels --sidecar tcp://localhost:7070 to it.
// Never cached, like every function on the workspace: they answer with the
// sidecar's state at call time.
// +cache="never"
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
// /workspace and no git. --image picks what its commands find installed
// (e.g. Go for `exec --cmd "go test ./..."`).
// +cache="never"
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
	// The workspace's container image, present on the sidecar's Docker
	// engine (or pullable by it), with bash (and git, with --repo), e.g.
	// "golang:1.26.8-bookworm" to run Go in it. Default: the sidecar's,
	// patina/base:bookworm (bash and git, no compilers).
	// +optional
	image string,
) (string, error) {
	return call(ctx, w, daggerws.CreateRequest{Name: w.Name, Repo: repo, Base: base, Image: image}, daggerws.Create)
}

// List prints the sidecar's workspaces, oldest first: a table (NAME,
// STATUS, BRANCH, REPO, CREATED), or with --format json the sidecar's JSON
// array. It ignores --name.
// +cache="never"
func (w *PatinaWorkspace) List(
	ctx context.Context,
	// Output format: "table" or "json".
	// +default="table"
	format string,
) (string, error) {
	return call(ctx, w, daggerws.ListRequest{Format: format}, daggerws.List)
}

// Exec runs a bash command line in a session of the workspace (a shell
// that persists between calls: cwd, exports and functions stay), waits for
// it and prints its stdout. A non-zero exit or a timeout fails the call
// with the exit code, the trimmed stderr and the tail of stdout, unless
// --allow-failure. The command runs in the workspace's container, in
// /workspace. Note that `exit` ends the session's shell: use `(exit 1)`,
// or --fresh to start the session again.
// +cache="never"
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
	return call(ctx, w, daggerws.ExecRequest{
		Workspace:    w.Name,
		Session:      session,
		Command:      cmd,
		TimeoutMS:    int64(timeoutMs),
		AllowFailure: allowFailure,
		Fresh:        fresh,
	}, daggerws.Exec)
}

// Diff prints the workspace's changes against its base (committed,
// uncommitted and untracked) as a unified diff that `git apply` takes;
// nothing when there are none.
// +cache="never"
func (w *PatinaWorkspace) Diff(ctx context.Context) (string, error) {
	return call(ctx, w, daggerws.DiffRequest{Workspace: w.Name}, daggerws.Diff)
}

// Commit stages everything in the workspace and commits it on its branch
// patina/<name>, printing the commit ("nothing to commit" is no failure).
// +cache="never"
func (w *PatinaWorkspace) Commit(
	ctx context.Context,
	// The commit message.
	message string,
) (string, error) {
	return call(ctx, w, daggerws.CommitRequest{Workspace: w.Name, Message: message}, daggerws.Commit)
}

// Merge merges exactly the commit the last diff showed into a branch of the
// repository on the sidecar's machine and prints which and how
// (fast-forward, merge commit, up to date). It fails, changing nothing,
// when nothing was diffed, when the workspace changed since the diff (diff
// again), when the diff held uncommitted work (commit first), or on a
// conflict.
// +cache="never"
func (w *PatinaWorkspace) Merge(
	ctx context.Context,
	// The branch to merge into. Default: the branch the workspace was
	// created from.
	// +optional
	into string,
) (string, error) {
	return call(ctx, w, daggerws.MergeRequest{Workspace: w.Name, Into: into}, daggerws.Merge)
}

// Delete removes the workspace: its container, sessions, worktree and
// (unless --keep-branch) its branch.
// +cache="never"
func (w *PatinaWorkspace) Delete(
	ctx context.Context,
	// Keep the workspace's git branch (and its notes).
	// +optional
	keepBranch bool,
) (string, error) {
	return call(ctx, w, daggerws.DeleteRequest{Workspace: w.Name, KeepBranch: keepBranch}, daggerws.Delete)
}

// Directory returns the workspace's files (its /workspace, what `exec`
// sees) as a Directory: export it (`directory export --path ./out`), or
// build and test exactly what an agent left there, e.g. in Dagger Shell.
// Copied: directories and regular files with their permission bits, and
// links to files inside the workspace as copies of those files. Left out,
// and listed in the call's log: the worktree's .git file, links to
// directories or out of the workspace, fifos, sockets and devices.
// Reading stops with an error past --max-files files or --max-bytes bytes.
// +cache="never"
func (w *PatinaWorkspace) Directory(
	ctx context.Context,
	// The most files to copy; more fail the call.
	// +default=100000
	maxFiles int,
	// The most bytes to copy, all files together; more fail the call.
	// +default=1073741824
	maxBytes int,
) (*dagger.Directory, error) {
	req := daggerws.FetchRequest{Workspace: w.Name, Dest: ".", MaxFiles: maxFiles, MaxBytes: int64(maxBytes)}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	c, err := w.connect(ctx)
	if err != nil {
		return nil, err
	}
	// The function's own container holds the copy; Workdir paths are
	// relative to its working directory. A new directory per call, so
	// that no call sees another's files.
	dir, err := os.MkdirTemp(".", "patina-workspace-")
	if err != nil {
		return nil, err
	}
	req.Dest = dir
	res, err := daggerws.Fetch(ctx, c, req)
	if err != nil {
		return nil, err
	}
	fmt.Fprintln(os.Stderr, res.Summary())
	return dag.CurrentModule().Workdir(filepath.Base(dir)).Sync(ctx)
}

// call checks req, then connects to the sidecar and runs op: arguments
// that are wrong fail before the engine is asked for anything.
func call[R interface{ Validate() error }](
	ctx context.Context,
	w *PatinaWorkspace,
	req R,
	op func(context.Context, daggerws.API, R) (string, error),
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

// connect starts the engine's tunnel to the sidecar and resolves its
// endpoint and the token, at call time. Endpoint alone only names the
// tunnel: until it is started, the name does not resolve from this
// function's container ("no such host", seen on a v0.20.6 engine).
func (w *PatinaWorkspace) connect(ctx context.Context) (*client.Client, error) {
	if _, err := w.Sidecar.Start(ctx); err != nil {
		return nil, fmt.Errorf("start the tunnel to the sidecar (--sidecar): %w", err)
	}
	endpoint, err := w.Sidecar.Endpoint(ctx, dagger.ServiceEndpointOpts{Scheme: "http"})
	if err != nil {
		return nil, fmt.Errorf("reach the sidecar service (--sidecar): %w", err)
	}
	token, err := w.Token.Plaintext(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the token secret (--token): %w", err)
	}
	c, err := daggerws.Connect(endpoint, token)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// goContainer is the Go image with the module and build caches and the
// source mounted at the working directory. The image is resolved first.
func (m *Patina) goContainer(ctx context.Context, image string) (*dagger.Container, error) {
	ctr, err := from(ctx, dag.Container(), "--go-image", image)
	if err != nil {
		return nil, err
	}
	return ctr.
		WithMountedCache(pipeline.GoModCachePath, dag.CacheVolume(pipeline.GoModCacheVolume)).
		WithMountedCache(pipeline.GoBuildCachePath, dag.CacheVolume(pipeline.GoBuildCacheVolume)).
		WithDirectory(pipeline.SourcePath, m.Source).
		WithWorkdir(pipeline.SourcePath), nil
}

// from resolves ref, the image that flag sets, on ctr. When the engine
// answers that it cannot (a pinned digest an engine without a registry does
// not have: "…@sha256:…: not found"), the error names the flag and what to
// give it; other errors (no engine at all) are returned as they are.
func from(ctx context.Context, ctr *dagger.Container, flag, ref string) (*dagger.Container, error) {
	ctr, err := ctr.From(ref).Sync(ctx)
	if err != nil {
		var answered *gqlerror.Error
		if errors.As(err, &answered) {
			return nil, &pipeline.UnresolvedImageError{Flag: flag, Ref: ref, Err: err}
		}
		return nil, fmt.Errorf("resolve %s %s: %w", flag, ref, err)
	}
	return ctr, nil
}

// withDocker installs what the integration tests need (Docker's engine,
// debootstrap, the tools of the second-host tests) and mounts a cache volume
// at the engine's data root, so that images the tests build (the default
// workspace image) are kept between runs.
func withDocker(ctr *dagger.Container) *dagger.Container {
	return ctr.
		WithExec(pipeline.IntegrationSetup()).
		WithMountedCache(pipeline.DockerDataPath, dag.CacheVolume(pipeline.DockerDataVolume),
			dagger.ContainerWithMountedCacheOpts{Sharing: dagger.CacheSharingModePrivate})
}

func withEnv(ctr *dagger.Container, env []pipeline.EnvVar) *dagger.Container {
	for _, e := range env {
		ctr = ctr.WithEnvVariable(e.Name, e.Value)
	}
	return ctr
}

// executor runs pipeline steps as successive execs of one container.
//
// A step's exec expects success (Dagger's default), so that a failing step
// is an error of the engine's, which it does not cache: a failed `test` (a
// flaky test, a broken engine) runs again on the next call instead of being
// answered from the cache with the same failure, as it was with Expect:
// ReturnTypeAny, under which a failed exec was a result like any other. The
// failure's exit code and output come from the engine's ExecError.
type executor struct {
	ctr *dagger.Container
}

func (x *executor) Exec(ctx context.Context, step pipeline.Step) (pipeline.Outcome, error) {
	ctr := x.ctr.WithExec(step.Args, dagger.ContainerWithExecOpts{
		InsecureRootCapabilities: step.Privileged,
	})
	stdout, err := ctr.Stdout(ctx)
	if err != nil {
		var failed *dagger.ExecError
		if errors.As(err, &failed) {
			return execFailure(step, failed), nil
		}
		return pipeline.Outcome{}, fmt.Errorf("run %v: %w", step.Args, err)
	}
	stderr, err := ctr.Stderr(ctx)
	if err != nil {
		return pipeline.Outcome{}, fmt.Errorf("stderr of %v: %w", step.Args, err)
	}
	x.ctr = ctr
	return pipeline.Outcome{Step: step, Stdout: stdout, Stderr: stderr}, nil
}

// execFailure is the outcome of a step whose command failed. An ExecError
// without an exit code (the command could not be started) is reported as
// exit 127, as a shell does.
func execFailure(step pipeline.Step, e *dagger.ExecError) pipeline.Outcome {
	code := e.ExitCode
	if code == 0 {
		code = 127
	}
	return pipeline.Outcome{Step: step, ExitCode: code, Stdout: e.Stdout, Stderr: e.Stderr}
}
