package session

import (
	"context"
	"os"
	"testing"
	"time"
)

// The tests run with the reaper on, as the agent does (its main calls
// StartReaper).
func TestMain(m *testing.M) {
	StartReaper()
	os.Exit(m.Run())
}

// A process LocalLauncher started is reaped once it exits, by the reaper
// and, in a program that did not start one, by a goroutine of its own:
// no zombie is left.
func TestLocalLauncherReaps(t *testing.T) {
	for _, withReaper := range []bool{true, false} {
		reaper.mu.Lock()
		reaper.on = withReaper
		reaper.mu.Unlock()
		t.Cleanup(func() {
			reaper.mu.Lock()
			reaper.on = true
			reaper.mu.Unlock()
		})
		pidFile := t.TempDir() + "/pid"
		err := LocalLauncher{}.Start(context.Background(), Process{Argv: []string{"sh", "-c", "echo $$ > " + pidFile + "; sleep 0.1"}})
		if err != nil {
			t.Fatal(err)
		}
		var pid string
		waitFor(t, "the process to start", 5*time.Second, func() bool {
			b, _ := os.ReadFile(pidFile)
			pid = string(b)
			return len(b) > 1 && b[len(b)-1] == '\n'
		})
		pid = pid[:len(pid)-1]
		waitFor(t, "the process to be reaped", 5*time.Second, func() bool {
			_, err := os.Stat("/proc/" + pid)
			return err != nil
		})
	}
}
