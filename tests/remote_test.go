package tests

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/patina-dev/patina/sidecar/client"
)

// A sidecar driving a remote engine (DOCKER_HOST=tcp://..., a second
// engine in its own network namespace): the six isolation tests and a
// scratch workspace's lifecycle run there, through the exec relay (the
// sidecar cannot enter the remote containers' namespaces); a repository
// workspace, whose files would be on the sidecar's host, is refused with a
// clear 400.
func TestRemoteEngine(t *testing.T) {
	e := StartSecondEngine(t)
	h := StartWithEnv(t, []string{"DOCKER_HOST=" + e.Host})
	if !strings.Contains(h.Logs(), "agent_transport=exec") {
		t.Fatalf("exp the exec transport for a remote engine; logs:\n%s", lastLines(h.Logs(), 20))
	}
	t.Run("isolation", func(t *testing.T) { checkSessionIsolation(t, h) })
	ctx := context.Background()
	t.Run("scratch lifecycle", func(t *testing.T) {
		ws := h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "far"})
		// The container is on the second engine, not this host's.
		if _, err := e.Client(t).ContainerInspect(ctx, ws.ContainerID); err != nil {
			t.Fatalf("the workspace's container is not on the remote engine: %v", err)
		}
		// A port forward works through the exec relay: the tunnel is the
		// agent's channel, whatever the engine.
		p := startTestServer(t, h, "far", "127.0.0.1:3000", 3000)
		if got := httpGet(t, "http://"+p.Address+"/hello"); !strings.HasPrefix(got, "hello from ") {
			t.Fatalf("port forward on a remote engine: %q", got)
		}
		checkStopStartKeepsState(t, h, "far")
		// exec's p50 through the relay, for the closing note's figures.
		var lat []time.Duration
		for i := 0; i < 200; i++ {
			t0 := time.Now()
			h.Exec("far", "default", "true")
			lat = append(lat, time.Since(t0))
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		t.Logf("remote engine: HTTP exec of true p50 %s, p90 %s (n=%d)", lat[len(lat)/2], lat[len(lat)*9/10], len(lat))
		if err := h.Client.DeleteWorkspace(ctx, "far", client.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("repository refused", func(t *testing.T) {
		repo := GitRepo(t, map[string]string{"a": "a\n"})
		_, err := h.Client.CreateWorkspace(ctx, client.CreateWorkspaceRequest{Name: "local-repo", Repo: repo})
		if !IsCode(err, client.CodeInvalid) || !strings.Contains(err.Error(), "remote") {
			t.Fatalf("exp a clear 400 for a repository workspace on a remote engine, got %v", err)
		}
	})
}

// checkStopStartKeepsState stops and starts workspace ws and checks that
// its default session kept its directory and variable, and its files.
func checkStopStartKeepsState(t *testing.T, h *Harness, ws string) {
	t.Helper()
	ctx := context.Background()
	h.Out(ws, "default", "cd /tmp; export FAR=1; echo data > /workspace/f")
	if _, err := h.Client.StopWorkspace(ctx, ws); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Client.StartWorkspace(ctx, ws); err != nil {
		t.Fatal(err)
	}
	if got := h.Out(ws, "default", "echo $PWD $FAR; cat /workspace/f"); got != "/tmp 1\ndata\n" {
		t.Fatalf("after stop/start: %q", got)
	}
}
