package pipeline

import "strconv"

// Settings of the integration test run (Test with integration=true).
const (
	// DockerServiceHost is the host name the docker:dind service is bound as.
	DockerServiceHost = "docker"
	// DockerServicePort is dockerd's plain-TCP port inside the service.
	DockerServicePort = 2375
	// DockerDataVolume keeps the service's /var/lib/docker between runs
	// (images the tests build, e.g. patina/base:bookworm). Mounted with
	// private sharing: concurrent runs each get their own copy.
	DockerDataVolume = "patina-dind-data"
	DockerDataPath   = "/var/lib/docker"
	// SharedTmpVolume is mounted at SharedTmpPath in both the test container
	// and the Docker service, and is the tests' TMPDIR: the worktrees the
	// tests create under t.TempDir() are bind-mounted into workspace
	// containers by a Docker engine that runs in another container, so the
	// paths must exist, with the same content, on both sides.
	SharedTmpVolume = "patina-test-tmp"
	SharedTmpPath   = "/patina-tmp"
)

// Test timeouts handed to go test (per test binary).
const (
	ShortTimeout       = "10m"
	IntegrationTimeout = "30m"
)

// TestRequest describes one Test call.
type TestRequest struct {
	// Integration runs the whole suite against a Docker engine instead of
	// the -short subset.
	Integration bool
}

// Steps returns what Test runs, in order: go vet, then go test. Without
// integration, -short asks tests that need Docker, debootstrap or the
// network to skip; with it, -count=1 keeps go's test cache from replaying a
// result that depended on the engine's state.
func (r TestRequest) Steps() []Step {
	test := []string{"go", "test", "-race"}
	if r.Integration {
		test = append(test, "-count=1", "-timeout", IntegrationTimeout)
	} else {
		test = append(test, "-short", "-timeout", ShortTimeout)
	}
	test = append(test, "./...")
	return []Step{
		{Name: "go vet", Args: []string{"go", "vet", "./..."}},
		// The debootstrap the image package runs needs root capabilities
		// (mknod, chroot) that a default container does not have.
		{Name: "go test", Args: test, Privileged: r.Integration},
	}
}

// Env returns the test container's extra environment: none for short runs;
// the Docker service and the shared TMPDIR for integration runs.
func (r TestRequest) Env() []EnvVar {
	if !r.Integration {
		return nil
	}
	return []EnvVar{
		{"DOCKER_HOST", DockerHost()},
		{"TMPDIR", SharedTmpPath},
	}
}

// DockerHost is the DOCKER_HOST of the integration tests.
func DockerHost() string {
	return "tcp://" + DockerServiceHost + ":" + strconv.Itoa(DockerServicePort)
}

// IntegrationSetup is the command that installs what the integration tests
// need on top of the Go image (which already has bash and git).
func IntegrationSetup() []string {
	return []string{"sh", "-c", "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap"}
}

// DockerdArgs starts the service's engine listening on plain TCP (the
// service is reachable only from the test container bound to it).
func DockerdArgs() []string {
	return []string{"dockerd", "--host=tcp://0.0.0.0:" + strconv.Itoa(DockerServicePort), "--host=unix:///var/run/docker.sock", "--tls=false"}
}
