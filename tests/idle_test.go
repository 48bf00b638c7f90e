package tests

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
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

// TestIdleStop: a workspace with idle_stop is stopped once nothing uses it
// (paused first, its processes kept; stopped after as long again), never
// while a command runs; its next exec starts it again with each session's
// cwd, variables and functions and says it was resumed; so does a port
// connection; it resumes even after its container was removed, and after
// the sidecar restarted while it was paused; a workspace stopped by
// request stays stopped.
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
		// Paused, not stopped: the server is thawed with it and answers.
		// One connection, closed after (an idle one kept open would be
		// activity).
		hc := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := hc.Get("http://" + p.Address + "/hello")
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.HasPrefix(string(got), "hello from ") {
			t.Fatalf("the server of a paused workspace after a connection resumed it: %q", got)
		}
		w, err := h.Client.GetWorkspace(ctx, "sleepy")
		if err != nil || w.Status != client.StatusRunning {
			t.Fatalf("exp a port connection to start the workspace, got %+v %v", w, err)
		}
	})

	t.Run("paused, then stopped", func(t *testing.T) {
		// idle_stop 3s: paused after 3 s (its processes kept), stopped
		// after 6 s (its container ended, its memory freed).
		h.Out("sleepy", "default", "(sleep 1000 >/dev/null 2>&1 &)")
		w := waitIdleStopped(t, h, "sleepy")
		if !w.IdleStopped || !strings.Contains(w.Error, "paused") {
			t.Fatalf("the first stage: exp paused, got %+v", w)
		}
		if st := ContainerState(t, w.ContainerID); st != "paused" {
			t.Fatalf("the first stage: exp its container paused, got %s", st)
		}
		res := h.Exec("sleepy", "default", "echo $PWD $NAP; pgrep -x sleep >/dev/null && echo kept")
		if res.Stdout != "/tmp 1\nkept\n" || !res.Resumed {
			t.Fatalf("resumed from a pause: exp the state and the background process, got %q resumed=%v", res.Stdout, res.Resumed)
		}
		w = waitIdleStopped(t, h, "sleepy")
		WaitFor(t, "the second stage (stopped)", 40*time.Second, func() bool {
			w, _ = h.Client.GetWorkspace(ctx, "sleepy")
			return w.IdleStopped && strings.Contains(w.Error, "paused, then stopped")
		})
		if st := ContainerState(t, w.ContainerID); w.Status != client.StatusStopped || st != "exited" {
			t.Fatalf("the second stage: exp stopped (idle), its container exited, got %+v (container %s)", w, st)
		}
		res = h.Exec("sleepy", "default", "echo $PWD $NAP; pgrep -x sleep >/dev/null || echo gone")
		if res.Stdout != "/tmp 1\ngone\n" || !res.Resumed {
			t.Fatalf("resumed from a stop: exp the state back in new shells, got %q resumed=%v", res.Stdout, res.Resumed)
		}
	})

	t.Run("sidecar restarted while paused", func(t *testing.T) {
		h.Out("sleepy", "default", "true") // resumed from its stop
		w := waitIdleStopped(t, h, "sleepy")
		h.Kill9()
		h.Launch()
		WaitFor(t, "the workspace adopted", 60*time.Second, func() bool {
			got, err := h.Client.GetWorkspace(ctx, "sleepy")
			return err == nil && got.Status == client.StatusStopped
		})
		if st := ContainerState(t, w.ContainerID); st != "paused" {
			t.Fatalf("after a restart: exp the idle workspace still paused, got %s", st)
		}
		if res := h.Exec("sleepy", "default", "echo $NAP"); res.Stdout != "1\n" || !res.Resumed {
			t.Fatalf("resumed after a restart: %q resumed=%v", res.Stdout, res.Resumed)
		}
	})

	t.Run("container removed while stopped", func(t *testing.T) {
		w := waitIdleStopped(t, h, "sleepy")
		RemoveContainer(t, w.ContainerID) // paused: removed all the same
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

// TestHostileIdlePause: a workspace that wants to keep working while idle
// stop has paused it (a loop in the background, started before) makes no
// progress while paused: its processes are frozen, not merely unobserved;
// and they carry on once its next use resumes it.
func TestHostileIdlePause(t *testing.T) {
	h := Start(t)
	ws := h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "ticker", IdleStop: "2s"})
	if ws.Worktree == "" {
		t.Skip("the workspace's files are not on the host here (no disk pool): its loop cannot be watched without resuming it")
	}
	h.Out("ticker", "default", "(while :; do echo tick >> /workspace/ticks; sleep 0.1; done >/dev/null 2>&1 &)")
	ticks := func() int {
		b, err := os.ReadFile(filepath.Join(ws.Worktree, "ticks"))
		if err != nil {
			t.Fatalf("read the workspace's ticks from the host: %v", err)
		}
		return strings.Count(string(b), "\n")
	}
	w := waitIdleStopped(t, h, "ticker")
	if !w.IdlePaused {
		t.Fatalf("exp the workspace paused, got %+v", w)
	}
	before := ticks()
	time.Sleep(3 * time.Second)
	if after := ticks(); after != before {
		t.Fatalf("a paused workspace's loop went on: %d ticks, then %d", before, after)
	}
	if res := h.Exec("ticker", "default", "sleep 1; wc -l < /workspace/ticks"); !res.Resumed {
		t.Fatalf("exp the exec to resume the workspace: %+v", res)
	}
	if after := ticks(); after <= before {
		t.Fatalf("the loop did not carry on after the resume: %d ticks, then %d", before, after)
	}
}
