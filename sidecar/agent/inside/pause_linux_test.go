package inside

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

const pauseHelper = "PATINA_TEST_PAUSE"

// The init outlives the signals whose Go default would end it (root in
// the workspace may send PID 1 any it handles), and ends, exit 0, on
// SIGTERM.
func TestPauseOutlivesSignals(t *testing.T) {
	if os.Getenv(pauseHelper) == "1" {
		err := Pause(context.Background(), PauseConfig{})
		fmt.Println("pause:", err)
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPauseOutlivesSignals$")
	cmd.Env = append(os.Environ(), pauseHelper+"=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Pause has taken the signals once its noise is registered: give it a
	// moment, then check it is still there after each.
	time.Sleep(300 * time.Millisecond)
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGPIPE, syscall.SIGALRM, syscall.SIGABRT} {
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			t.Fatalf("the init ended on %v: %v\n%s", sig, err, out.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil || !bytes.Contains(out.Bytes(), []byte("pause: <nil>")) {
			t.Fatalf("exp Pause to return nil on SIGTERM, got %v\n%s", err, out.String())
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("still running 30 s after SIGTERM\n%s", out.String())
	}
}
