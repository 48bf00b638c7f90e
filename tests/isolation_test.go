package tests

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/patina-dev/patina/sidecar/client"
)

// The six seed isolation tests: two sessions in one workspace, over HTTP.
func TestSessionIsolation(t *testing.T) {
	checkSessionIsolation(t, Start(t))
}

// checkSessionIsolation runs the six isolation tests in a new workspace
// "iso" of h's sidecar.
func checkSessionIsolation(t *testing.T, h *Harness) {
	checkSessionIsolationIn(t, h, client.CreateWorkspaceRequest{Name: "iso"})
}

// checkSessionIsolationIn runs them in a workspace made by req (its name
// must be "iso").
func checkSessionIsolationIn(t *testing.T, h *Harness, req client.CreateWorkspaceRequest) {
	ws := h.CreateWorkspace(req)
	h.CreateSession(ws.ID, client.CreateSessionRequest{ID: "a"})
	h.CreateSession(ws.Name, client.CreateSessionRequest{ID: "b"})

	t.Run("env vars isolated", func(t *testing.T) {
		h.Out("iso", "a", "export ONLY_A=1")
		if got := h.Out("iso", "b", "echo ${ONLY_A-unset}"); got != "unset\n" {
			t.Fatalf("session b sees a's variable: %q", got)
		}
		if got := h.Out("iso", "a", "echo $ONLY_A"); got != "1\n" {
			t.Fatalf("session a lost its variable: %q", got)
		}
	})
	t.Run("cwd isolated", func(t *testing.T) {
		h.Out("iso", "a", "cd /tmp")
		if got := h.Out("iso", "b", "pwd"); got != "/workspace\n" {
			t.Fatalf("session b's cwd moved: %q", got)
		}
		if got := h.Out("iso", "a", "pwd"); got != "/tmp\n" {
			t.Fatalf("session a's cwd: %q", got)
		}
	})
	t.Run("functions isolated", func(t *testing.T) {
		h.Out("iso", "a", "only_a() { echo from-a; }")
		res := h.Exec("iso", "b", "only_a")
		if res.ExitCode != 127 {
			t.Fatalf("session b can call a's function: exit %d %q", res.ExitCode, res.Stdout)
		}
		if got := h.Out("iso", "a", "only_a"); got != "from-a\n" {
			t.Fatalf("session a's function: %q", got)
		}
	})
	t.Run("process space shared", func(t *testing.T) {
		pid := strings.TrimSpace(h.Out("iso", "a", "sleep 300 & echo $!"))
		if got := h.Out("iso", "b", "ps -o pid= -p "+pid+" | tr -d ' '"); strings.TrimSpace(got) != pid {
			t.Fatalf("session b does not see a's process %s: %q", pid, got)
		}
		h.Out("iso", "b", "kill "+pid)
	})
	t.Run("filesystem shared", func(t *testing.T) {
		h.Out("iso", "a", "echo shared > /workspace/shared.txt; echo tmp > /tmp/t.txt")
		if got := h.Out("iso", "b", "cat /workspace/shared.txt /tmp/t.txt"); got != "shared\ntmp\n" {
			t.Fatalf("session b does not see a's files: %q", got)
		}
	})
	t.Run("concurrent execution", func(t *testing.T) {
		var wg sync.WaitGroup
		start := time.Now()
		for _, sid := range []string{"a", "b"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := h.Client.Exec(context.Background(), "iso", sid, client.ExecRequest{Command: "sleep 1; echo " + sid})
				if err != nil || res.Stdout != sid+"\n" {
					t.Errorf("session %s: %v %+v", sid, err, res)
				}
			}()
		}
		wg.Wait()
		if wall := time.Since(start); wall >= 1800*time.Millisecond {
			t.Fatalf("two 1 s commands in two sessions took %s: not parallel", wall)
		} else {
			t.Logf("two 1 s commands in parallel: %s", wall)
		}
	})
}

// Setting env through the API twice in a row works (the seed bug).
func TestSetEnvTwice(t *testing.T) {
	h := Start(t)
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "env"})
	ctx := context.Background()
	for i, env := range []map[string]string{{"A": "1", "B": "x y"}, {"A": "2", "C": "it's"}} {
		if err := h.Client.SetEnv(ctx, "env", "default", client.SetEnvRequest{Env: env}); err != nil {
			t.Fatalf("SetEnv #%d: %v", i+1, err)
		}
	}
	if got := h.Out("env", "default", `echo "$A|$B|$C"`); got != "2|x y|it's\n" {
		t.Fatalf("exp both settings applied, got %q", got)
	}
}
