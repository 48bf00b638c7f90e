package inside

import (
	"bytes"
	"context"
	"fmt"
	"os"
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
	h := startHelper(t, "TestPauseOutlivesSignals", pauseHelper)
	// Pause has taken the signals once its noise is registered: give it a
	// moment, then check it is still there after each.
	time.Sleep(300 * time.Millisecond)
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGPIPE, syscall.SIGALRM, syscall.SIGABRT} {
		if err := h.cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		if ended, err := h.endedWithin(100 * time.Millisecond); ended {
			t.Fatalf("the init ended on %v: %v\n%s", sig, err, h.out.String())
		}
	}
	if err := h.term(t); err != nil || !bytes.Contains(h.out.Bytes(), []byte("pause: <nil>")) {
		t.Fatalf("exp Pause to return nil on SIGTERM, got %v\n%s", err, h.out.String())
	}
}
