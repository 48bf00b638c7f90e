package pipeline

import "strings"

// Settings of the integration test run (Test with integration=true). The
// tests run with a Docker engine in their own container (dockerd started
// beside go test), not as a separate service: the sidecar reaches each
// workspace's agent through the container's network namespace and
// bind-mounts paths of its own host, which needs the engine on the same
// host, as on a developer's machine and in .ci/run.
const (
	// DockerDataVolume keeps the engine's /var/lib/docker between runs
	// (images the tests build, e.g. patina/base:bookworm). Mounted with
	// private sharing: concurrent runs each get their own copy.
	DockerDataVolume = "patina-dind-data"
	DockerDataPath   = "/var/lib/docker"
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
// network to skip; with it, go test runs beside a Docker engine started in
// the same container, and -count=1 keeps go's test cache from replaying a
// result that depended on the engine's state.
func (r TestRequest) Steps() []Step {
	test := []string{"go", "test", "-race"}
	if r.Integration {
		test = append(test, "-count=1", "-timeout", IntegrationTimeout)
	} else {
		test = append(test, "-short", "-timeout", ShortTimeout)
	}
	test = append(test, "./...")
	if r.Integration {
		test = WithDockerd(test)
	}
	return []Step{
		{Name: "go vet", Args: []string{"go", "vet", "./..."}},
		// dockerd, and the debootstrap the image package runs, need root
		// capabilities (mounts, mknod, chroot, network namespaces) that a
		// default container does not have.
		{Name: "go test", Args: test, Privileged: r.Integration},
	}
}

// IntegrationPackages are the Debian packages the integration tests need
// on top of the Go image: the same as .ci/run's (a test keeps them so).
// Docker's engine (Debian's docker.io), debootstrap to build the default
// workspace image offline, iproute2, util-linux and fuse-overlayfs to run
// a second engine in a network namespace as another host, tmux to drive
// `patina attach` as a person would, iptables for the network boundary,
// xfsprogs and e2fsprogs for the workspaces' disks, runsc (gVisor), gcc
// for -race, Python and Node with their tools for the clients' suites,
// chromium, node-xterm and libjs-xterm for the console's.
func IntegrationPackages() []string {
	return []string{"bash", "git", "debootstrap", "docker.io", "procps", "ca-certificates", "iproute2", "iptables", "util-linux",
		"fuse-overlayfs", "tmux", "xfsprogs", "e2fsprogs", "runsc",
		"gcc", "libc6-dev", "python3", "python3-pytest", "python3-venv", "python3-setuptools", "python3-mypy", "nodejs", "node-typescript",
		"chromium", "node-xterm", "libjs-xterm"}
}

// IntegrationSetup is the command that installs IntegrationPackages.
func IntegrationSetup() []string {
	return []string{"sh", "-c", "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends " +
		strings.Join(IntegrationPackages(), " ")}
}

// withDockerd is the script that runs its arguments with a Docker engine
// started beside them: dockerd in the background, a bounded wait for it to
// answer (PATINA_DOCKERD_WAIT seconds, 60 by default), the command, then
// dockerd stopped (bounded too) so the step ends.
const withDockerd = `log=$(mktemp -t patina-dockerd.XXXXXX) || exit 1
dockerd >"$log" 2>&1 &
d=$!
for _ in $(seq 1 "${PATINA_DOCKERD_WAIT:-60}"); do docker info >/dev/null 2>&1 && break; sleep 1; done
if ! docker info >/dev/null 2>&1; then
	echo "dockerd did not start within ${PATINA_DOCKERD_WAIT:-60}s:" >&2
	tail -n 50 "$log" >&2
	kill "$d" 2>/dev/null
	rm -f "$log"
	exit 1
fi
"$@"
rc=$?
kill "$d" 2>/dev/null
for _ in $(seq 1 30); do kill -0 "$d" 2>/dev/null || break; sleep 1; done
rm -f "$log"
exit $rc
`

// WithDockerd wraps args so that they run with a Docker engine started in
// the same container.
func WithDockerd(args []string) []string {
	return append([]string{"bash", "-c", withDockerd, "patina-integration"}, args...)
}
