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
// workspace gets its objects shipped and its work comes back checked.
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
	// The repository is the parent's: a subtest's TempDir is gone when
	// the next one runs.
	repo := GitRepo(t, map[string]string{"a": "a\n", "src/b.txt": "b\n"})
	t.Run("repository round trip", func(t *testing.T) {
		checkRepoRoundTrip(t, h, repo, "far-repo")
	})
	t.Run("hostile: the shipped objects wrecked from inside", func(t *testing.T) {
		checkWreckedStore(t, h, repo, "wreck")
	})
}

// checkRepoRoundTrip creates a workspace of repo (its objects shipped when
// the engine is elsewhere), changes files inside, and checks diff, commit
// and merge into the repository on the sidecar's host.
func checkRepoRoundTrip(t *testing.T, h *Harness, repo, name string, placement ...string) client.Workspace {
	t.Helper()
	ctx := context.Background()
	ws := h.CreateWorkspace(client.CreateWorkspaceRequest{Name: name, Repo: repo, Placement: placement})
	if got := h.Out(name, "default", "cat /workspace/a /workspace/src/b.txt"); got != "a\nb\n" {
		t.Fatalf("exp the base checked out in the workspace, got %q", got)
	}
	h.Out(name, "default", "cd /workspace && echo changed > a && echo new > "+name+".txt")
	d, err := h.Client.Diff(ctx, name)
	if err != nil || len(d.Files) != 2 || !strings.Contains(d.Text, "+changed") {
		t.Fatalf("diff: %+v, %v", d, err)
	}
	cr, err := h.Client.Commit(ctx, name, client.CommitRequest{Message: "from " + name})
	if err != nil || !cr.Committed {
		t.Fatalf("commit: %+v, %v", cr, err)
	}
	mr, err := h.Client.Merge(ctx, name, client.MergeRequest{})
	if err != nil {
		t.Fatalf("merge: %v", err)
	}
	if got := strings.TrimSpace(gitIn(t, repo, "show", mr.Commit+":"+name+".txt")); got != "new" {
		t.Fatalf("exp the workspace's new file merged, got %q", got)
	}
	if got := strings.TrimSpace(gitIn(t, repo, "rev-parse", "patina/"+name)); got != cr.Commit {
		t.Fatalf("exp patina/%s at the workspace's commit %s, got %s", name, cr.Commit, got)
	}
	return ws
}

// checkWreckedStore: the workspace replaces the store its objects were
// shipped to; that costs it a clear error and nothing else (the user's
// branches stay), and a restart ships the objects again.
func checkWreckedStore(t *testing.T, h *Harness, repo, name string, placement ...string) {
	t.Helper()
	ctx := context.Background()
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: name, Repo: repo, Placement: placement})
	// The user's own branches (the workspace's patina/NAME moves with its
	// commits).
	userBranches := func() string {
		var own []string
		for _, l := range strings.Split(strings.TrimSpace(gitIn(t, repo, "for-each-ref", "refs/heads")), "\n") {
			if !strings.Contains(l, "refs/heads/patina/") {
				own = append(own, l)
			}
		}
		return strings.Join(own, "\n")
	}
	before := userBranches()
	h.Out(name, "default", "rm -rf /.patina/state/base.git && mkdir -p /.patina/state/base.git/objects && echo junk > /.patina/state/base.git/HEAD && echo x > /workspace/x")
	// The workspace's repository is made again at the base (issue 26.5):
	// the commit keeps the files' work and says it repaired the repository.
	if cr, err := h.Client.Commit(ctx, name, client.CommitRequest{Message: "x"}); err != nil || !cr.Committed || cr.Repaired == "" {
		t.Fatalf("exp the commit to repair the wrecked repository and keep the work, got %+v, %v", cr, err)
	}
	if after := userBranches(); after != before {
		t.Fatalf("the user's branches moved:\n%s\n%s", before, after)
	}
	h.Out(name, "default", "echo y > /workspace/y")
	if _, err := h.Client.StopWorkspace(ctx, name); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Client.StartWorkspace(ctx, name); err != nil {
		t.Fatalf("exp a restart to ship the objects again, got %v", err)
	}
	if cr, err := h.Client.Commit(ctx, name, client.CommitRequest{Message: "x"}); err != nil || !cr.Committed {
		t.Fatalf("commit after the restart: %+v, %v", cr, err)
	}
	if err := h.Client.DeleteWorkspace(ctx, name, client.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
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
