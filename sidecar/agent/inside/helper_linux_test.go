package inside

import (
	"bytes"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// helperProc is this test binary started again to play a process of the
// container (an init, an agent): the test it runs sees its variable set to
// 1 and runs its helper part instead of the test.
type helperProc struct {
	cmd  *exec.Cmd
	out  bytes.Buffer // stdout and stderr; read only once it has ended
	done chan error
}

// startHelper runs the test named test again with key=1 and env in its
// environment; the helper is killed at the test's end if still running.
func startHelper(t *testing.T, test, key string, env ...string) *helperProc {
	t.Helper()
	h := &helperProc{done: make(chan error, 1)}
	h.cmd = exec.Command(os.Args[0], "-test.run=^"+test+"$")
	h.cmd.Env = append(append(os.Environ(), key+"=1"), env...)
	h.cmd.Stdout, h.cmd.Stderr = &h.out, &h.out
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { h.done <- h.cmd.Wait() }()
	t.Cleanup(func() { _ = h.cmd.Process.Kill() })
	return h
}

// endedWithin waits up to d for the helper to end and says whether it
// did, and how.
func (h *helperProc) endedWithin(d time.Duration) (bool, error) {
	select {
	case err := <-h.done:
		return true, err
	default:
	}
	select {
	case err := <-h.done:
		return true, err
	case <-time.After(d):
		return false, nil
	}
}

// term sends the helper SIGTERM and returns how it ended; the test fails
// if it is still running 30 s later.
func (h *helperProc) term(t *testing.T) error {
	t.Helper()
	if err := h.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if ended, err := h.endedWithin(30 * time.Second); ended {
		return err
	}
	_ = h.cmd.Process.Kill()
	<-h.done
	t.Fatalf("still running 30 s after SIGTERM\n%s", h.out.String())
	return nil
}
