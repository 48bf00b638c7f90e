package tests

// End-to-end tests of the Dagger module (dagger.json and main.go at the
// repository root) through the real `dagger` CLI and engine.
//
// They run wherever a `dagger` CLI is on PATH and an engine answers it. Where
// either is missing (as on machines that cannot run Dagger at all) every test
// here SKIPS with a message saying it did not run: a skip, never a pass, so
// `go test -v` and CI summaries show that the Dagger functions went untested.
// The engine-free checks of the module (wiring, help text, generated code)
// are the root package's tests and hack/daggergen's -check; the workspace
// functions' logic is tested against a real sidecar in internal/wsglue.
// TestDaggerWorkspace also starts a sidecar, so it needs Docker as the
// other end-to-end tests do.

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// daggerNotRun starts every skip message of this file.
const daggerNotRun = "Dagger end-to-end tests did NOT run"

// daggerE2E is a dagger CLI that answered, and the module root it runs in.
type daggerE2E struct {
	bin  string
	root string
	// env is added to the CLI's environment (e.g. PATINA_TOKEN=...).
	env []string
}

// needDagger returns a working dagger CLI or skips the test, loudly.
func needDagger(t *testing.T) daggerE2E {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: " + daggerNotRun)
	}
	bin, err := exec.LookPath("dagger")
	if err != nil {
		t.Skip("dagger CLI not found: " + daggerNotRun)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "dagger.json")); err != nil {
		t.Fatalf("no dagger.json at the repository root %s: %v", root, err)
	}
	d := daggerE2E{bin: bin, root: root}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, errOut, err := d.run(ctx, "core", "version")
	if err != nil {
		t.Skipf("dagger CLI at %s found, but no engine answered `dagger core version` (%v): %s\n%s%s",
			bin, err, daggerNotRun, out, errOut)
	}
	t.Logf("dagger %s, engine %s", bin, strings.TrimSpace(out))
	return d
}

// run runs the dagger CLI in the module root and returns stdout and stderr.
func (d daggerE2E) run(ctx context.Context, args ...string) (string, string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, d.bin, append([]string{"--progress=plain"}, args...)...)
	cmd.Dir = d.root
	if len(d.env) > 0 {
		cmd.Env = append(os.Environ(), d.env...)
	}
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// mustCall runs `dagger call args...` and fails the test with the CLI's
// output if it fails.
func (d daggerE2E) mustCall(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := d.call(t, args...)
	if err != nil {
		t.Fatalf("dagger call %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// call runs `dagger call args...` and returns stdout, stderr and how it
// ended.
func (d daggerE2E) call(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), daggerCallTimeout(t))
	defer cancel()
	return d.run(ctx, append([]string{"call"}, args...)...)
}

// daggerCallTimeout leaves a minute of the test binary's deadline for
// reporting; a cold engine pulls images, so calls get up to 20 minutes.
func daggerCallTimeout(t *testing.T) time.Duration {
	limit := 20 * time.Minute
	if deadline, ok := t.Deadline(); ok {
		if left := time.Until(deadline) - time.Minute; left < limit {
			limit = left
		}
	}
	if limit <= 0 {
		t.Fatal("no time left for a dagger call: raise go test -timeout")
	}
	return limit
}

// TestDaggerBuild builds the binary with `dagger call build`, exports it and
// runs it.
func TestDaggerBuild(t *testing.T) {
	d := needDagger(t)
	bin := filepath.Join(t.TempDir(), "patina")
	d.mustCall(t, "build", "--version", "e2e-1.2.3", "export", "--path", bin)

	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s version: %v\n%s", bin, err, out)
	}
	if exp := "patina e2e-1.2.3"; !strings.Contains(string(out), exp) {
		t.Errorf("version: exp %q in the output, got %q", exp, out)
	}
}

// TestDaggerBuildImage checks that the sidecar image holds a working binary.
func TestDaggerBuildImage(t *testing.T) {
	d := needDagger(t)
	out := d.mustCall(t, "build-image", "--version", "e2e-image", "with-exec", "--args", "patina,version", "stdout")
	if exp := "patina e2e-image"; !strings.Contains(out, exp) {
		t.Errorf("exp %q in the output, got %q", exp, out)
	}
}

// TestDaggerTest runs `dagger call test`: go vet and the -short suite must
// pass inside the engine.
func TestDaggerTest(t *testing.T) {
	d := needDagger(t)
	out := d.mustCall(t, "test")
	for _, exp := range []string{"== go vet: ok", "== go test: ok"} {
		if !strings.Contains(out, exp) {
			t.Errorf("exp %q in the report, got:\n%s", exp, out)
		}
	}
}

// TestDaggerLint runs `dagger call lint`: gofmt, vet and the generated-code
// check must pass.
func TestDaggerLint(t *testing.T) {
	d := needDagger(t)
	out := d.mustCall(t, "lint")
	if !strings.Contains(out, "== generated code: ok") {
		t.Errorf("exp the generated-code check in the report, got:\n%s", out)
	}
}

// TestDaggerWorkspace drives a real sidecar through the module's workspace
// functions, as a user does: `patina serve` runs on this machine (started
// here on a free loopback port), the engine reaches it through
// --sidecar tcp://localhost:PORT, and the token comes from the environment
// with --token env:PATINA_TOKEN.
func TestDaggerWorkspace(t *testing.T) {
	d := needDagger(t)
	h := Start(t)
	_, port, err := net.SplitHostPort(strings.TrimPrefix(h.Client.Addr(), "http://"))
	if err != nil {
		t.Fatalf("sidecar address %q: %v", h.Client.Addr(), err)
	}
	d.env = append(d.env, "PATINA_TOKEN="+h.Token)
	repo := GitRepo(t, map[string]string{"README.md": "hello\n"})
	const name = "dagger-e2e"
	ws := func(fn string, args ...string) []string {
		return append([]string{"workspace", "--sidecar", "tcp://localhost:" + port,
			"--token", "env:PATINA_TOKEN", "--name", name, fn}, args...)
	}
	expIn := func(what, out string, exps ...string) {
		t.Helper()
		for _, exp := range exps {
			if !strings.Contains(out, exp) {
				t.Errorf("%s: exp %q in the output, got:\n%s", what, exp, out)
			}
		}
	}

	out := d.mustCall(t, ws("create", "--repo", repo)...)
	expIn("create", out, "name:", name, "patina/"+name)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := h.Client.GetWorkspace(ctx, name); err != nil {
		t.Fatalf("the sidecar does not know the workspace create made: %v", err)
	}

	expIn("list", d.mustCall(t, ws("list")...), "NAME", name, "running")

	out = d.mustCall(t, ws("exec", "--cmd", "printf 'changed\\n' > README.md && cat README.md")...)
	expIn("exec", out, "changed")

	// A failing command fails the call, with its exit code and stderr...
	out, errOut, err := d.call(t, ws("exec", "--cmd", "echo partial; echo oops >&2; (exit 3)")...)
	if err == nil {
		t.Errorf("exec of a failing command: exp the call to fail, got stdout:\n%s", out)
	}
	expIn("failing exec", out+errOut, "exit code 3", "oops")
	// ...unless --allow-failure, which returns its stdout.
	expIn("exec --allow-failure", d.mustCall(t, ws("exec", "--cmd", "echo partial; (exit 3)", "--allow-failure")...), "partial")

	expIn("diff", d.mustCall(t, ws("diff")...), "--- a/README.md", "-hello", "+changed")
	expIn("commit", d.mustCall(t, ws("commit", "--message", "dagger e2e")...), "committed ")
	expIn("merge", d.mustCall(t, ws("merge")...), "fast-forwarded main")
	expIn("delete", d.mustCall(t, ws("delete")...), "deleted workspace "+name)
}
