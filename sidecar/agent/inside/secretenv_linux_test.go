//go:build linux

package inside

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/patina-dev/patina/sidecar/agent/wire"
)

const secretEnvHelper = "PATINA_TEST_SECRET_ENV_HELPER"

// TestMain lets the test binary act as a process that takes its secret:
// it calls takeSecretEnv, reports what it and a child of its own see, and
// waits for its stdin to close while the test looks at it from outside.
func TestMain(m *testing.M) {
	if os.Getenv(secretEnvHelper) == "1" {
		v, err := takeSecretEnv(wire.TokenEnv, os.Getenv("PATINA_TEST_SEAL") == "1")
		self, _ := os.ReadFile("/proc/self/environ")
		child, _ := exec.Command("/bin/sh", "-c", "env").Output()
		fmt.Printf("value=%s err=%v self=%t child=%t other=%s\n", v, err,
			bytes.Contains(self, []byte(v)), bytes.Contains(child, []byte(v)), os.Getenv("PATINA_TEST_OTHER"))
		bufio.NewReader(os.Stdin).ReadString('\n')
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestTakeSecretEnv starts a process with a token in its environment, as
// the agent and the container's init are started, and looks for the token
// where a root shell in the container would: the process's
// /proc/<pid>/environ (readable, without the token, or not readable at
// all), and the environment of the process's children.
func TestTakeSecretEnv(t *testing.T) {
	for _, seal := range []bool{false, true} {
		t.Run(fmt.Sprintf("seal=%t", seal), func(t *testing.T) { testTakeSecretEnv(t, seal) })
	}
}

func testTakeSecretEnv(t *testing.T, seal bool) {
	const token = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), secretEnvHelper+"=1", wire.TokenEnv+"="+token, "PATINA_TEST_OTHER=kept")
	if seal {
		cmd.Env = append(cmd.Env, "PATINA_TEST_SEAL=1")
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	if exp := "value=" + token + " err=<nil> self=false child=false other=kept\n"; line != exp {
		t.Fatalf("exp %q, got %q", exp, line)
	}
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", cmd.Process.Pid))
	switch {
	case errors.Is(err, fs.ErrPermission):
		t.Logf("its environ is not readable from here (no CAP_SYS_PTRACE): %v", err)
	case err != nil:
		t.Fatal(err)
	case bytes.Contains(environ, []byte(token)):
		t.Fatalf("the token is still in /proc/<pid>/environ")
	case !strings.Contains(string(environ), "PATINA_TEST_OTHER=kept"):
		t.Fatalf("the rest of the environment was damaged: %q", environ)
	}
}
