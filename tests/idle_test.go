package tests

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/patina-dev/patina/sidecar/client"
)

// waitIdleStopped waits until the workspace was stopped for being idle.
func waitIdleStopped(t *testing.T, h *Harness, ws string) client.Workspace {
	t.Helper()
	var w client.Workspace
	WaitFor(t, "the idle stop of "+ws, 40*time.Second, func() bool {
		var err error
		w, err = h.Client.GetWorkspace(context.Background(), ws)
		return err == nil && w.Status == client.StatusStopped
	})
	if !strings.Contains(w.Error, "idle") {
		t.Fatalf("exp the stop to say the workspace was idle, got %q", w.Error)
	}
	return w
}

// TestIdleStop: a workspace with idle_stop is stopped once nothing uses it,
// never while a command runs; its next exec starts it again with each
// session's cwd, variables and functions and says it was resumed; so does
// a port connection; it resumes even after its container was removed; a
// workspace stopped by request stays stopped.
func TestIdleStop(t *testing.T) {
	h := Start(t)
	ctx := context.Background()
	for _, bad := range []string{"abc", "-1s", "10ms", "9999h"} {
		if _, err := h.Client.CreateWorkspace(ctx, client.CreateWorkspaceRequest{Name: "bad", IdleStop: bad}); !IsCode(err, client.CodeInvalid) {
			t.Fatalf("idle_stop %q: exp 400, got %v", bad, err)
		}
	}
	ws := h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "sleepy", IdleStop: "3s"})
	if ws.IdleStop != "3s" {
		t.Fatalf("exp idle_stop 3s in the workspace, got %q", ws.IdleStop)
	}
	h.Out("sleepy", "default", "cd /tmp; export NAP=1; nap() { echo zzz; }; alias zz='echo alias'")

	// A command running is activity: 14 s of sleep outlasts the idle
	// limit and a check.
	if _, err := h.Client.Start(ctx, "sleepy", "default", client.ExecRequest{Command: "sleep 14"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(13 * time.Second)
	for time.Now().Before(deadline) {
		w, err := h.Client.GetWorkspace(ctx, "sleepy")
		if err != nil || w.Status != client.StatusRunning {
			t.Fatalf("stopped while a command ran: %+v %v", w, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	waitIdleStopped(t, h, "sleepy")

	res := h.Exec("sleepy", "default", "echo $PWD $NAP; nap; zz")
	if res.Stdout != "/tmp 1\nzzz\nalias\n" || !res.Resumed {
		t.Fatalf("after the idle stop: exp the state back and resumed, got %q resumed=%v", res.Stdout, res.Resumed)
	}
	if res := h.Exec("sleepy", "default", "true"); res.Resumed {
		t.Fatal("a second exec says resumed again")
	}

	t.Run("port connection resumes", func(t *testing.T) {
		p := startTestServer(t, h, "sleepy", "127.0.0.1:3000", 3000)
		waitIdleStopped(t, h, "sleepy")
		c, err := net.DialTimeout("tcp", p.Address, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(60 * time.Second))
		c.Read(make([]byte, 1)) // the server is gone with the old container: closed
		c.Close()
		w, err := h.Client.GetWorkspace(ctx, "sleepy")
		if err != nil || w.Status != client.StatusRunning {
			t.Fatalf("exp a port connection to start the workspace, got %+v %v", w, err)
		}
	})

	t.Run("container removed while stopped", func(t *testing.T) {
		w := waitIdleStopped(t, h, "sleepy")
		RemoveContainer(t, w.ContainerID)
		res := h.Exec("sleepy", "default", "echo $PWD $NAP")
		if res.Stdout != "/tmp 1\n" || !res.Resumed {
			t.Fatalf("exp the state back in a new container, got %q resumed=%v", res.Stdout, res.Resumed)
		}
	})

	t.Run("stopped by request stays stopped", func(t *testing.T) {
		if _, err := h.Client.StopWorkspace(ctx, "sleepy"); err != nil {
			t.Fatal(err)
		}
		if _, err := h.Client.Exec(ctx, "sleepy", "default", client.ExecRequest{Command: "true"}); !IsCode(err, client.CodeStopped) {
			t.Fatalf("exp 409 stopped, got %v", err)
		}
	})

	t.Run("never", func(t *testing.T) {
		w := h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "awake", IdleStop: "0"})
		if w.IdleStop != "" {
			t.Fatalf("idle_stop 0: exp none, got %q", w.IdleStop)
		}
	})
}
