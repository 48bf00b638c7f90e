package inside

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const shellInitHelper = "PATINA_TEST_SHELL_INIT"

// The init, once it has started its child (the agent), becomes bash: it
// keeps no environment (the first agent's token was in the init's), reaps
// that child when it ends though bash never started it, and exits 0 on
// SIGTERM, as `agent pause` did.
func TestExecShellInit(t *testing.T) {
	if os.Getenv(shellInitHelper) == "1" {
		shellInitHelperMain()
		return
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash here: the init stays itself where there is none")
	}
	h := startHelper(t, "TestExecShellInit", shellInitHelper, "PATINA_AGENT_TOKEN=secret-of-the-first-agent")
	pid := h.cmd.Process.Pid
	proc := fmt.Sprintf("/proc/%d/", pid)
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(proc + "cmdline")
		if strings.HasPrefix(string(b), shellInitName+"\x00-c\x00") {
			break
		}
		if ended, err := h.endedWithin(0); ended {
			t.Fatalf("the helper ended before it became bash: %v\n%s", err, h.out.String())
		}
		if time.Now().After(deadline) {
			t.Fatalf("not bash after 30 s: cmdline %q", b)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if env, err := os.ReadFile(proc + "environ"); err != nil || len(env) != 0 {
		t.Errorf("exp an empty environment, got %q %v", env, err)
	}
	// Its child (a 0.2 s sleep, started before the exec) ends and is reaped.
	deadline = time.Now().Add(30 * time.Second)
	for len(childrenOf(t, pid)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("its child is not reaped: %v", childrenOf(t, pid))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := h.term(t); err != nil {
		t.Fatalf("exp exit 0 on SIGTERM, got %v\n%s", err, h.out.String())
	}
}

// shellInitHelperMain is the init's part: take the token out as Pause
// does, start a short child, become bash.
func shellInitHelperMain() {
	if tok, _ := takeSecretEnv("PATINA_AGENT_TOKEN", false); tok == "" {
		fmt.Println("no token in the helper's environment")
		os.Exit(3)
	}
	sleep, err := exec.LookPath("sleep")
	if err == nil {
		var p *os.Process
		if p, err = os.StartProcess(sleep, []string{"sleep", "0.2"}, &os.ProcAttr{Files: []*os.File{nil, os.Stdout, os.Stderr}}); err == nil {
			_ = p.Release()
			err = execShellInit()
		}
	}
	fmt.Println("execShellInit:", err)
	os.Exit(3)
}

// childrenOf lists the pids whose parent is pid (zombies included).
func childrenOf(t *testing.T, pid int) []string {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var kids []string
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil { // ended meanwhile
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		s := string(b)
		rest := s[strings.LastIndexByte(s, ')')+1:]
		fields := strings.Fields(rest)
		if len(fields) >= 2 && fields[1] == strconv.Itoa(pid) {
			kids = append(kids, strings.TrimSpace(s[:strings.IndexByte(s, ' ')])+" "+fields[0])
		}
	}
	return kids
}

// A bash on the PATH that is a link to another program (busybox takes its
// applet from argv[0]; dash has no read -u) is refused before any exec:
// the init stays itself.
func TestExecShellInitRefusesAnotherShell(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh here")
	}
	real, err := filepath.EvalSymlinks(sh)
	if err != nil || filepath.Base(real) == "bash" {
		t.Skipf("sh is bash here (%s %v): nothing else to link to", real, err)
	}
	dir := t.TempDir()
	if err := os.Symlink(real, filepath.Join(dir, "bash")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	err = execShellInit()
	if err == nil || !strings.Contains(err.Error(), "not bash") {
		t.Fatalf("exp a refusal of %s as bash, got %v", real, err)
	}
}
