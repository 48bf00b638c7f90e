package pipeline

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestTestSteps(t *testing.T) {
	short := TestRequest{}.Steps()
	if len(short) != 2 || short[0].Name != "go vet" || short[1].Name != "go test" {
		t.Fatalf("exp go vet then go test, got %+v", short)
	}
	if exp := []string{"go", "vet", "./..."}; !slices.Equal(exp, short[0].Args) {
		t.Errorf("vet: exp %q, got %q", exp, short[0].Args)
	}
	if exp := []string{"go", "test", "-race", "-short", "-timeout", ShortTimeout, "./..."}; !slices.Equal(exp, short[1].Args) {
		t.Errorf("test: exp %q, got %q", exp, short[1].Args)
	}
	if short[1].Privileged {
		t.Error("short tests must not be privileged")
	}

	integ := TestRequest{Integration: true}.Steps()
	goTest := []string{"go", "test", "-race", "-count=1", "-timeout", IntegrationTimeout, "./..."}
	if args := integ[1].Args; len(args) < 4 || args[0] != "bash" || args[1] != "-c" || !slices.Equal(goTest, args[4:]) {
		t.Errorf("integration test: exp bash -c <start dockerd> NAME %q, got %q", goTest, args)
	}
	if !integ[1].Privileged {
		t.Error("integration tests run dockerd and debootstrap: exp privileged")
	}
}

// TestWithDockerd runs the wrapper script with a fake dockerd and docker on
// PATH: it starts the engine, runs the command with its arguments intact,
// returns its exit code and stops the engine; an engine that never answers
// fails the step with its log instead of running the tests.
func TestWithDockerd(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatalf("needs bash: %v", err)
	}
	bin := t.TempDir()
	marker := filepath.Join(t.TempDir(), "up")
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/bash\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("dockerd", "echo engine log line; touch "+marker+"; trap 'rm -f "+marker+"; exit 0' TERM; while :; do sleep 0.1; done\n")
	write("docker", "test -e "+marker+"\n")
	run := func(args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return string(out), cmd.ProcessState.ExitCode()
	}
	out, code := run(WithDockerd([]string{"bash", "-c", `test -e "$1" && echo "up: $2"; exit 3`, "x", marker, "a b"})...)
	if code != 3 || !strings.Contains(out, "up: a b") {
		t.Errorf("exp the command to run with the engine up, its arguments intact and its exit code 3, got %d %q", code, out)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Errorf("exp dockerd stopped after the command, its marker is still there (%v)", err)
	}

	write("docker", "exit 1\n")
	out, code = run(append([]string{"env", "PATINA_DOCKERD_WAIT=2"}, WithDockerd([]string{"echo", "tests ran"})...)...)
	if code == 0 || strings.Contains(out, "tests ran") || !strings.Contains(out, "engine log line") {
		t.Errorf("an engine that never answers: exp a failed step with its log and no tests, got %d %q", code, out)
	}
}

// `dagger call test --integration` installs what .ci/run installs: a test
// that needs a package fails without it, in both.
func TestIntegrationPackagesAreCIs(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)\npkgs=\(([^)]*)\)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("no pkgs=( … ) in .ci/run")
	}
	ci := strings.Fields(string(m[1]))
	got := IntegrationPackages()
	slices.Sort(ci)
	got = slices.Sorted(slices.Values(got))
	if !slices.Equal(ci, got) {
		t.Fatalf(".ci/run installs %v\nthe integration setup %v", ci, got)
	}
}
