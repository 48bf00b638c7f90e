package tests

import (
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestClients runs the Python and TypeScript clients' own suites and
// examples (clients/python: pytest; clients/typescript: tsc, node --test)
// against a real sidecar, through a proxy that checks every request they
// send and every answer they get against the OpenAPI document. It needs
// Debian's python3, python3-pytest, python3-venv, python3-mypy, nodejs and
// node-typescript (.ci/run installs them); without them it fails, saying
// which is missing.
func TestClients(t *testing.T) {
	h := Start(t)
	python, node, tsc := clientTools(t)

	// Every request of the clients passes the OpenAPI check on its way.
	target, err := url.Parse(h.Client.Addr())
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = ValidatingClient(t, true).Transport
	proxy.FlushInterval = -1 // output and events as they come
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	env := append(os.Environ(),
		"PATINA_ADDR="+srv.URL, "PATINA_TOKEN="+h.Token,
		"PATINA_STATE_DIR="+t.TempDir(), // nothing of a real sidecar's
		"PYTHONDONTWRITEBYTECODE=1")
	root := RepoRoot()

	t.Run("python", func(t *testing.T) {
		// Typed: py.typed is a promise mypy checks (for Python 3.9 too).
		run(t, env, filepath.Join(root, "clients", "python"), 5*time.Minute, python, "-m", "mypy", "--cache-dir", filepath.Join(t.TempDir(), "mypy"),
			"--python-version", "3.9", "--strict", "src/patina")

		// Installable offline, in a fresh venv with nothing but pip.
		fresh := filepath.Join(t.TempDir(), "fresh")
		run(t, env, root, 2*time.Minute, python, "-m", "venv", fresh)
		run(t, env, root, 2*time.Minute, filepath.Join(fresh, "bin", "pip"), "uninstall", "-q", "-y", "setuptools")
		run(t, env, root, 2*time.Minute, filepath.Join(fresh, "bin", "pip"), "install", "-q", "--no-index", "--no-build-isolation", "./clients/python")
		run(t, env, t.TempDir(), time.Minute, filepath.Join(fresh, "bin", "python"), "-c", "import patina, patina.aio; assert patina.Client")

		// The suite, in a venv that sees Debian's pytest.
		venv := filepath.Join(t.TempDir(), "venv")
		run(t, env, root, 2*time.Minute, python, "-m", "venv", "--system-site-packages", venv)
		py := filepath.Join(venv, "bin", "python")
		run(t, env, root, 2*time.Minute, py, "-m", "pip", "install", "-q", "--no-index", "--no-build-isolation", "./clients/python")
		out := run(t, env, filepath.Join(root, "clients", "python"), 10*time.Minute, py, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", "tests")
		if strings.Contains(out, "skipped") {
			t.Errorf("pytest skipped tests:\n%s", out)
		}

		repo := calcRepo(t)
		run(t, env, root, 5*time.Minute, py, "clients/python/examples/agent_loop.py", "--repo", repo)
		checkFixed(t, repo)
	})

	t.Run("typescript", func(t *testing.T) {
		// A copy to build in: dist/ stays out of the source tree.
		dir := filepath.Join(t.TempDir(), "typescript")
		run(t, env, root, time.Minute, "cp", "-r", "clients/typescript", dir)
		_ = os.RemoveAll(filepath.Join(dir, "dist"))
		run(t, env, dir, 5*time.Minute, tsc, "-p", ".")
		out := run(t, env, dir, 10*time.Minute, node, "--test", "test/")
		if !strings.Contains(out, "# fail 0") || !strings.Contains(out, "# skipped 0") {
			t.Errorf("node --test:\n%s", out)
		}
		repo := calcRepo(t)
		run(t, env, dir, 5*time.Minute, node, "examples/agent-loop.mjs", "--repo", repo)
		checkFixed(t, repo)
	})
}

// clientTools finds Debian's python3 (with pytest), node and tsc.
func clientTools(t *testing.T) (python, node, tsc string) {
	t.Helper()
	// Debian's python3 first: another on PATH (pyenv's, say) lacks
	// python3-pytest.
	python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		python = "python3"
	}
	var missing []string
	if err := exec.Command(python, "-c", "import pytest, venv, ensurepip, mypy").Run(); err != nil {
		missing = append(missing, "python3 python3-pytest python3-venv python3-mypy")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing = append(missing, "nodejs")
	}
	tsc, err = exec.LookPath("tsc")
	if err != nil {
		missing = append(missing, "node-typescript")
	}
	if len(missing) > 0 {
		t.Fatalf("the clients' tests need Debian's %s (apt-get install -y them; .ci/run does)", strings.Join(missing, ", "))
	}
	return python, node, tsc
}

// run runs a command, failing the test with its output when it fails.
func run(t *testing.T, env []string, dir string, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.WaitDelay = 5 * time.Second
	done := make(chan struct{})
	timer := time.AfterFunc(timeout, func() {
		if cmd.Process != nil {
			_ = cmd.Process.Kill()
		}
		close(done)
	})
	out, err := cmd.CombinedOutput()
	if !timer.Stop() {
		<-done
		t.Fatalf("%s %s: did not finish within %s:\n%s", name, strings.Join(args, " "), timeout, out)
	}
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// calcRepo is a repository whose tests fail: add subtracts.
func calcRepo(t *testing.T) string {
	t.Helper()
	return GitRepo(t, map[string]string{
		"calc.sh": "add() { echo $(( $1 - $2 )); }\nmul() { echo $(( $1 * $2 )); }\n",
		"test.sh": `. ./calc.sh
fail=0
[ "$(add 2 3)" = 5 ] || { echo "FAIL: add 2 3 gave $(add 2 3), want 5"; fail=1; }
[ "$(mul 2 3)" = 6 ] || { echo "FAIL: mul 2 3 gave $(mul 2 3), want 6"; fail=1; }
[ $fail = 0 ] && echo "ok: 2 tests"
exit $fail
`,
	})
}

// checkFixed: the example merged the fix into main.
func checkFixed(t *testing.T, repo string) {
	t.Helper()
	out, err := exec.Command("git", "-C", repo, "show", "main:calc.sh").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "$(( $1 + $2 ))") {
		t.Fatalf("the example's fix is not on main: %v\n%s", err, out)
	}
}
