package tests

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Tests under gVisor: the same test bodies, against a sidecar started with
// `patina serve --runtime runsc` on an engine that has runsc registered.
//
// The main engine's configuration is not changed: runsc gets a Docker
// engine of its own (StartRunscEngine, a SecondEngine whose daemon.json
// registers the runtime), in its own network namespace, and the sidecar
// runs in that namespace too, as on a host of its own: its network
// boundary (the bridge, the egress proxy on its gateway, the firewall
// rules) is where the engine's bridge is. The test process reaches the
// sidecar on the namespace's veth address.
//
// Known differences under runsc 20221219, which tests meet:
//   - Debian bookworm's coreutils ls and stat fail with EINVAL ("cannot
//     statx '/': Invalid argument") on the paths tried (/, bind mounts):
//     gVisor's statx refuses what they ask of it. bash's test -e, cd, globs
//     and find work; tests use those.
//   - A SIGKILL sent from inside to the container's init (pid 1) is
//     delivered (the Linux kernel ignores it): the workspace stops. Only
//     that workspace's own loss; TestKillInit shows it under both runtimes.
//   - The mount flags a workspace sees in /proc/self/mountinfo are gVisor's
//     (9p mounts of its gofer), not the host mount's nosuid,nodev.

// runUnderRunsc runs named tests of this package again in a child test
// process whose harness (Start and the others) starts every sidecar that
// way; their bodies are unchanged.

// Environment of a child test process run under runsc.
const (
	envRunscNetns = "PATINA_TEST_RUNSC_NETNS" // the network namespace of the engine and the sidecar
	envRunscAddr  = "PATINA_TEST_RUNSC_ADDR"  // the namespace's address, where the sidecar listens
	envRunscHost  = "PATINA_TEST_RUNSC_HOST"  // DOCKER_HOST of the runsc engine
)

// runscArgs is how the runsc engine runs each container. Without
// --network=host, runsc 20221219 (its own network stack, netstack) does
// not start a container on a Docker bridge here: "setting up network:
// creating interfaces from net namespace /proc/N/ns/net: cannot run with
// network enabled in root network namespace". With it the Sentry uses the
// network namespace Docker made for the container (the container's, not
// the host's: Docker's bridge, patina's firewall rules and egress proxy
// apply as under runc) through host sockets its seccomp filter allows.
var runscArgs = []string{"--network=host"}

// StartRunscEngine starts a second Docker engine with gVisor's runsc
// registered as the runtime "runsc" (Debian's runsc package; .ci/run
// installs it), the default workspace image copied in.
func StartRunscEngine(t testing.TB) *SecondEngine {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a Docker engine with gVisor (skipped with -short)")
	}
	path, err := exec.LookPath("runsc")
	if err != nil {
		t.Fatal("gVisor's runsc is not installed (apt-get install runsc; .ci/run does)")
	}
	return startEngine(t, map[string]any{
		"runtimes": map[string]any{"runsc": map[string]any{"path": path, "runtimeArgs": runscArgs}},
	})
}

// underRunsc reports whether this test process runs its sidecars under
// runsc (a child of runUnderRunsc).
func underRunsc() bool { return os.Getenv(envRunscNetns) != "" }

// runscEnv is what a sidecar started under runsc adds to its environment:
// the runsc engine.
func runscEnv() []string {
	if !underRunsc() {
		return nil
	}
	return []string{"DOCKER_HOST=" + os.Getenv(envRunscHost)}
}

// runscCommand is how the harness runs `patina serve`: as is, or, under
// runsc, in the engine's network namespace, listening on its address, with
// --runtime runsc.
func runscCommand(bin string, args []string) *exec.Cmd {
	if !underRunsc() {
		return exec.Command(bin, args...)
	}
	args = append(args, "--addr", os.Getenv(envRunscAddr)+":0", "--runtime", "runsc")
	return exec.Command("nsenter", append([]string{"--net=/run/netns/" + os.Getenv(envRunscNetns), bin}, args...)...)
}

// runUnderRunsc runs the named tests of this package in a child test
// process whose sidecars run their workspaces on gVisor, on e (a
// StartRunscEngine), and fails with the output of each one that did not
// pass.
func runUnderRunsc(t *testing.T, e *SecondEngine, names ...string) {
	t.Helper()
	bin := Binary(t)
	timeout := 40 * time.Minute
	if d, ok := t.Deadline(); ok {
		timeout = time.Until(d) - 30*time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run", "^("+strings.Join(names, "|")+")$", "-test.v", "-test.timeout", timeout.String())
	cmd.Env = append(os.Environ(), "PATINA_E2E_BIN="+bin,
		envRunscNetns+"="+e.ns, envRunscAddr+"="+e.Addr, envRunscHost+"=unix://"+e.Socket)
	logPath := filepath.Join(t.TempDir(), "runsc-tests.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	t0 := time.Now()
	runErr := cmd.Run()
	logf.Close()
	out, _ := os.ReadFile(logPath)
	results := testResults(string(out))
	for _, name := range names {
		switch r := results[name]; r {
		case "PASS":
			t.Logf("%s passed under runsc", name)
		case "":
			t.Errorf("%s did not finish under runsc", name)
		default:
			t.Errorf("%s: %s under runsc", name, r)
		}
	}
	t.Logf("%d tests under runsc in %s", len(names), time.Since(t0).Round(time.Second))
	if t.Failed() || runErr != nil {
		t.Errorf("the tests under runsc: %v\n%s", runErr, lastLines(string(out), 400))
	}
}

var resultLine = regexp.MustCompile(`^--- (PASS|FAIL|SKIP): (\S+) `)

// testResults maps each top-level test of a `go test -v` output to its
// result (PASS, FAIL, SKIP).
func testResults(out string) map[string]string {
	res := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if m := resultLine.FindStringSubmatch(sc.Text()); m != nil {
			res[m[2]] = m[1]
		}
	}
	return res
}
