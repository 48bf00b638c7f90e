package tests

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/patina-dev/patina/sidecar/client"
	pcontainer "github.com/patina-dev/patina/sidecar/container"
)

// TestWarmPool: with serve --warm 2, a create of the default settings
// takes a started workspace from the pool; the next user's workspace holds
// nothing of the previous one (files, processes, sessions, environment,
// secrets, network policy); a workspace given out is never given again;
// pooled workspaces are hidden; creates of other settings make their own;
// after a kill -9 the pool of the dead run is deleted and made anew.
func TestWarmPool(t *testing.T) {
	h := StartWith(t, t.TempDir(), fmt.Sprintf("e2e-%d", time.Now().UnixNano()), nil, []string{"--warm", "2"})
	ctx := context.Background()
	dc := dockerClient(t)
	containers := func() map[string]bool {
		list, err := dc.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", pcontainer.LabelStateDir+"="+h.StateDir), filters.Arg("label", pcontainer.LabelWorkspace))})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, c := range list {
			out[c.ID] = c.State == "running"
		}
		return out
	}
	running := func(n int) func() bool {
		return func() bool {
			k := 0
			for _, r := range containers() {
				if r {
					k++
				}
			}
			return k >= n
		}
	}
	// fromPool counts the creates that took a pooled workspace so far, once
	// the log of the create just answered has been read (the sidecar logs
	// before it answers; the harness reads its log as it comes).
	fromPool := func(name string) int {
		t.Helper()
		WaitFor(t, "the log of the create of "+name, 30*time.Second, func() bool {
			l := h.Logs()
			return strings.Contains(l, "name="+name+"\n") || strings.Contains(l, "name="+name+" ")
		})
		return strings.Count(h.Logs(), `msg="workspace created from the warm pool"`)
	}
	// full waits for the pool to be full for the n-th time in this run.
	full := func(n int) {
		t.Helper()
		WaitFor(t, "the warm pool full", 3*time.Minute, func() bool { return strings.Count(h.Logs(), "ready=2 size=2") >= n })
	}
	full(1)
	if wss, err := h.Client.ListWorkspaces(ctx); err != nil || len(wss) != 0 {
		t.Fatalf("pooled workspaces are listed: %v %v", wss, err)
	}
	// Operators see it in /metrics.
	if st, b := h.Raw("GET", "/metrics", "", nil, nil); st != 200 || !strings.Contains(string(b), "\npatina_pool_ready 2\n") || !strings.Contains(string(b), "\npatina_pool_size 2\n") {
		t.Fatalf("/metrics: exp patina_pool_ready 2 and patina_pool_size 2, got %d:\n%s", st, b)
	}

	a := h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "user-a"})
	if fromPool("user-a") != 1 || a.Name != "user-a" || a.Status != client.StatusRunning {
		t.Fatalf("the first create did not take a pooled workspace: %+v, %d taken", a, fromPool("user-a"))
	}
	// User a leaves things behind.
	h.Out("user-a", "default", "echo a-secret > /workspace/a.txt; echo a > /root/a; export A_VAR=1; (sleep 1000 >/dev/null 2>&1 &)")
	h.CreateSession("user-a", client.CreateSessionRequest{ID: "a-session"})
	full(2)

	b := h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "user-b"})
	if fromPool("user-b") != 2 || b.ID == a.ID || b.ContainerID == a.ContainerID {
		t.Fatalf("the second create: %+v (a: %s), %d taken", b, a.ID, fromPool("user-b"))
	}
	// Its first session was started in the pool: there before any exec,
	// idle, with no command of anyone.
	ready, err := h.Client.ListSessions(ctx, "user-b")
	if err != nil || len(ready) != 1 || ready[0].ID != "default" || ready[0].Status != "idle" || ready[0].Commands != 0 || ready[0].Cwd != "/workspace" {
		t.Fatalf("user b's pooled workspace's sessions before its first exec: %+v %v (want default, idle, no command, in /workspace)", ready, err)
	}
	got := h.Out("user-b", "default", "ls -A /workspace; cat /root/a 2>&1; echo A_VAR=$A_VAR; pgrep -x sleep || echo no-sleep")
	if strings.Contains(got, "a.txt") || strings.Contains(got, "A_VAR=1") || !strings.Contains(got, "No such file") || !strings.Contains(got, "no-sleep") {
		t.Fatalf("user b's pooled workspace holds user a's state: %q", got)
	}
	sessions, err := h.Client.ListSessions(ctx, "user-b")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sessions {
		if s.ID == "a-session" {
			t.Fatalf("user b's workspace has user a's session: %+v", sessions)
		}
	}
	// A create with its own env, secret env and network policy takes one
	// too: it gets them before anyone sees it (its first session included),
	// and its network is cut to none.
	n := fromPool("user-b")
	full(3)
	c := h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "user-c", Env: map[string]string{"C_VAR": "c"}, SecretEnv: map[string]string{"C_SECRET": "s3cret"}, Network: &client.NetworkPolicy{Mode: client.NetworkNone}})
	if fromPool("user-c") != n+1 || c.Network.Mode != client.NetworkNone || c.Env["C_VAR"] != "c" {
		t.Fatalf("a create with env, secret env and network none did not take a pooled workspace: %+v", c)
	}
	if got := h.Out("user-c", "default", "echo $C_VAR $C_SECRET; ls /sys/class/net | grep -c eth || true"); got != "c s3cret\n0\n" {
		t.Fatalf("user c (env, secret env, network none, from the pool): %q", got)
	}
	h.CreateSession("user-c", client.CreateSessionRequest{ID: "second"})
	if got := h.Out("user-c", "second", "echo $C_VAR $C_SECRET"); got != "c s3cret\n" {
		t.Fatalf("user c's second session: %q", got)
	}
	// What the pool cannot give (other limits) makes its own.
	c2 := h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "user-c2", MemoryMB: 512})
	if fromPool("user-c2") != n+1 {
		t.Fatalf("a create of other limits took a pooled workspace: %+v", c2)
	}
	// A workspace given out is never given again: delete a, create more.
	if err := h.Client.DeleteWorkspace(ctx, "user-a", client.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	full(4)
	d := h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "user-d"})
	if d.ID == a.ID || d.ID == b.ID || d.ID == c.ID || d.ContainerID == a.ContainerID || fromPool("user-d") != n+2 {
		t.Fatalf("a workspace given out came back: %+v", d)
	}
	if got := h.Out("user-d", "default", "ls -A /workspace; echo C_SECRET=$C_SECRET C_VAR=$C_VAR; ls /sys/class/net | grep -c eth || true"); got != "C_SECRET= C_VAR=\n1\n" {
		t.Fatalf("user d (after c): %q", got)
	}
	if err := h.Client.DeleteWorkspace(ctx, "user-c2", client.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// kill -9: the dead run's pooled workspaces go, a new pool comes, the
	// users' workspaces stay.
	full(5)
	before := containers()
	h.Kill9()
	h.Launch()
	given := map[string]bool{b.ContainerID: true, c.ContainerID: true, d.ContainerID: true}
	WaitFor(t, "the old pool deleted and a new one made", 3*time.Minute, func() bool {
		now := containers()
		for id := range before {
			if !given[id] && now[id] {
				return false
			}
		}
		return running(5)() && strings.Contains(h.Logs(), "ready=2 size=2")
	})
	e := h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "user-e"})
	if before[e.ContainerID] || given[e.ContainerID] || !strings.Contains(h.Logs(), `msg="workspace created from the warm pool"`) {
		t.Fatalf("after kill -9 a create got %+v (the old run's containers %v)", e, before)
	}
	if got := h.Out("user-b", "default", "echo still"); got != "still\n" {
		t.Fatalf("user b after the restart: %q", got)
	}
	if wss, err := h.Client.ListWorkspaces(ctx); err != nil || len(wss) != 4 {
		t.Fatalf("after the restart: %d workspaces listed (want b, c, d, e): %v", len(wss), err)
	}
}

// TestWarmPoolTemplate: with serve --warm-template T=1, a template saved
// after the sidecar started fills its pool (the failures before say so
// once); a create of T takes the pooled workspace, with T's files and
// sessions and nothing of the previous user; template rm takes T's
// pooled workspace with it (nothing of T left running) and the pool does
// not come back without T.
func TestWarmPoolTemplate(t *testing.T) {
	cleanupTemplate := templateCleanup(t)
	name := fmt.Sprintf("warm-%d", time.Now().UnixNano())
	cleanupTemplate(name)
	h := StartWith(t, t.TempDir(), fmt.Sprintf("e2e-%d", time.Now().UnixNano()), nil, []string{"--warm-template", name + "=1"})
	ctx := context.Background()
	dc := dockerClient(t)
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "src"})
	h.Out("src", "default", "echo kept > /workspace/f.txt; cd /tmp; export FOO=bar")
	h.CreateSession("src", client.CreateSessionRequest{ID: "build", Cwd: "/var"})
	h.Out("src", "build", "export STAGE=2")
	tpl, err := h.Client.SnapshotWorkspace(ctx, "src", client.SnapshotWorkspaceRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	ofTemplate := func() int {
		list, err := dc.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", pcontainer.LabelStateDir+"="+h.StateDir))})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, c := range list {
			if c.ImageID == tpl.ImageID || c.Image == tpl.Image {
				n++
			}
		}
		return n
	}
	pooled := func(n int) {
		t.Helper()
		WaitFor(t, "template "+name+"'s pool full", 3*time.Minute, func() bool {
			return strings.Count(h.Logs(), "template="+name+" ready=1") >= n
		})
	}
	pooled(1)
	if n := strings.Count(h.Logs(), "pool: create a pooled workspace; trying again"); n > 1 {
		t.Fatalf("the missing template's fills were logged %d times (want once)", n)
	}

	a := h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "user-a", Template: name, Env: map[string]string{"MINE": "a"}})
	WaitFor(t, "the log of user-a's create", 30*time.Second, func() bool { return strings.Contains(h.Logs(), "name=user-a") })
	if !logLine(h.Logs(), `msg="workspace created from the warm pool"`, "workspace_id="+a.ID) || a.Template != name {
		t.Fatalf("a create of template %s did not take its pooled workspace: %+v", name, a)
	}
	if got := h.Out("user-a", "default", "cat /workspace/f.txt; pwd; echo $FOO $MINE"); got != "kept\n/tmp\nbar a\n" {
		t.Fatalf("the pooled workspace of the template: %q (want its files, its session's state, the create's env)", got)
	}
	if got := h.Out("user-a", "build", "pwd; echo $STAGE $MINE"); got != "/var\n2 a\n" {
		t.Fatalf("the pooled workspace's second session: %q (want its state and the create's env)", got)
	}
	h.Out("user-a", "default", "echo a-was-here > /workspace/a.txt; export A_VAR=1")
	if err := h.Client.DeleteWorkspace(ctx, "user-a", client.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	pooled(2)
	b := h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "user-b", Template: name})
	if b.ContainerID == a.ContainerID {
		t.Fatal("a workspace given out was given again")
	}
	if got := h.Out("user-b", "default", "ls /workspace; echo A_VAR=$A_VAR MINE=$MINE"); got != "f.txt\nA_VAR= MINE=\n" {
		t.Fatalf("user b's workspace of the template after user a: %q", got)
	}
	// In use by user-b: refused, and its pool is left alone.
	pooled(3)
	before := ofTemplate()
	var apiErr *client.APIError
	if err := h.Client.DeleteTemplate(ctx, name); !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict || !strings.Contains(apiErr.Message, "user-b") {
		t.Fatalf("template rm while user-b uses it: %v, want a 409 naming user-b", err)
	}
	if n := ofTemplate(); n != before || n != 2 || strings.Count(h.Logs(), "template="+name+" ready=") != 3 {
		t.Fatalf("a refused template rm touched its pool: %d containers of it (before %d; want user-b's and the pooled one)", n, before)
	}
	if err := h.Client.DeleteWorkspace(ctx, "user-b", client.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// The template goes with its pooled workspace, and stays gone.
	if err := h.Client.DeleteTemplate(ctx, name); err != nil {
		t.Fatalf("template rm with a pooled workspace of it: %v", err)
	}
	if n := ofTemplate(); n != 0 {
		t.Fatalf("%d containers of the removed template left", n)
	}
	time.Sleep(7 * time.Second) // longer than a failed fill's wait
	if _, err := dc.ImageInspect(ctx, "patina-template:"+name); err == nil || ofTemplate() != 0 {
		t.Fatalf("the removed template came back (image inspect: %v, containers %d)", err, ofTemplate())
	}
}

// logLine reports whether one line of the log holds every one of parts.
func logLine(log string, parts ...string) bool {
	for _, l := range strings.Split(log, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			return true
		}
	}
	return false
}
