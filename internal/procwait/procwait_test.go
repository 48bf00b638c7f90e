package procwait

import (
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Exited returns when the process exits, leaves it for Wait to reap, and
// Run keeps exec's results (exit status, output).
func TestExitedThenWait(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 0.2; echo out; exit 3")
	var out strings.Builder
	cmd.Stdout = &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	Exited(cmd.Process)
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("Exited returned after %s, before the process ended", d)
	}
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 || out.String() != "out\n" {
		t.Fatalf("exp exit 3 and %q, got %v and %q", "out\n", err, out.String())
	}
	if err := Run(exec.Command("true")); err != nil {
		t.Errorf("Run(true): %v", err)
	}
	if err := Run(exec.Command("/nonexistent")); err == nil {
		t.Error("Run of a missing program: exp an error")
	}
}

// A reaped process, or none: Exited returns at once.
func TestExitedReaped(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { Exited(cmd.Process); Exited(nil); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Exited blocked on a reaped process")
	}
}

// The point of the package: on one P, a goroutine waiting for a child
// leaves the P to the others. With a blocking wait the runtime would hand
// the P over only when sysmon notices, so this checks the poller path, not
// a timing: while the child runs, the waiting goroutine is parked in IO
// wait, never in a system call.
func TestExitedNotInSyscall(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waiting := make(chan struct{})
	go func() { Exited(cmd.Process); close(waiting) }()
	var stacks string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		buf := make([]byte, 1<<20)
		stacks = string(buf[:runtime.Stack(buf, true)])
		if strings.Contains(stacks, "[IO wait") && strings.Contains(stacks, "procwait.Exited") {
			break
		}
	}
	if !strings.Contains(stacks, "[IO wait") || !strings.Contains(stacks, "procwait.Exited") {
		t.Errorf("exp the waiter in IO wait:\n%s", stacks)
	}
	if strings.Contains(stacks, "Waitid") && strings.Contains(stacks, "[syscall") {
		t.Errorf("a goroutine is blocked in waitid:\n%s", stacks)
	}
	select {
	case <-waiting:
		t.Fatal("Exited returned while the child runs")
	default:
	}
	_ = cmd.Process.Kill()
	select {
	case <-waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("Exited did not return after the child was killed")
	}
	if err := cmd.Wait(); err == nil {
		t.Fatal("exp the killed child's status")
	}
}
