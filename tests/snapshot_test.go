package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/patina-dev/patina/sidecar/client"
	pcontainer "github.com/patina-dev/patina/sidecar/container"
	"github.com/patina-dev/patina/sidecar/template"
)

// TestSnapshot: patina ws snapshot saves a running workspace as a template
// (what it installed, its files, its own repository, each session's
// state and history, not its processes); workspaces created from it start
// with all of it and are each their own; the source is unchanged and
// runs on; what cannot be saved says why.
func TestSnapshot(t *testing.T) {
	cleanupTemplate := templateCleanup(t)
	h := Start(t)
	ctx := context.Background()
	dc := dockerClient(t)
	name := fmt.Sprintf("snap-%d", time.Now().UnixNano())
	cleanupTemplate(name)

	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "src", Env: map[string]string{"FROM_CREATE": "yes"}})
	h.Out("src", "default", strings.Join([]string{
		"printf '#!/bin/sh\\necho tool\\n' > /usr/local/bin/tool && chmod +x /usr/local/bin/tool",
		"mkdir -p /workspace/sub && echo one > /workspace/sub/one.txt",
		"cd /workspace && git init -q && git add -A && git -c user.name=a -c user.email=a@b commit -qm first",
		"ln -s /etc/shadow /workspace/link && mkfifo /workspace/fifo",
		"cd /workspace/sub; export FOO=bar; greet() { echo hi $1; }; alias al='echo aliased'",
		"(sleep 1000 >/dev/null 2>&1 &)",
	}, "\n"))
	h.CreateSession("src", client.CreateSessionRequest{ID: "build", Cwd: "/tmp"})
	h.Out("src", "build", "export STAGE=2")

	tpl, err := h.Client.SnapshotWorkspace(ctx, "src", client.SnapshotWorkspaceRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	if tpl.Name != name || tpl.Snapshot != "src" || tpl.Image != "patina-template:"+name || !tpl.Built || tpl.Env["FROM_CREATE"] != "yes" {
		t.Fatalf("the template: %+v", tpl)
	}
	if got, err := h.Client.GetTemplate(ctx, name); err != nil || got.Snapshot != "src" {
		t.Fatalf("template %s listed as %+v, %v", name, got, err)
	}
	// The source's agent token is not in the template's image.
	img, err := dc.ImageInspect(ctx, tpl.Image)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range img.Config.Env {
		if strings.HasPrefix(kv, "PATINA_AGENT_TOKEN=") && kv != "PATINA_AGENT_TOKEN=" {
			t.Fatalf("the template's image carries the source's agent token: %q", kv)
		}
	}
	// The source runs on, unchanged, its processes too.
	if got := h.Out("src", "default", "pwd; echo $FOO; pgrep -x sleep >/dev/null && echo sleeping; ls /.patina"); got != "/workspace/sub\nbar\nsleeping\nbin\nstate\n" {
		t.Fatalf("the source after its snapshot: %q", got)
	}

	a := h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "from-a", Template: name})
	if a.Template != name {
		t.Fatalf("created from the template: %+v", a)
	}
	if got := h.Out("from-a", "default", "pwd; echo $FOO; greet you; al; tool; cat /workspace/sub/one.txt; readlink /workspace/link; test -p /workspace/fifo && echo fifo; git -C /workspace log --format=%s -1; echo $FROM_CREATE"); got != "/workspace/sub\nbar\nhi you\naliased\ntool\none\n/etc/shadow\nfifo\nfirst\nyes\n" {
		t.Fatalf("a workspace from the template: %q", got)
	}
	if got := h.Out("from-a", "build", "pwd; echo $STAGE"); got != "/tmp\n2\n" {
		t.Fatalf("its second session: %q", got)
	}
	if got := h.Exec("from-a", "default", "pgrep -x sleep").ExitCode; got == 0 {
		t.Fatal("a process of the source was carried into the template's workspace")
	}
	if got := h.Out("from-a", "default", "test -e /.patina/seed && echo seed-left; echo ok"); got != "ok\n" {
		t.Fatalf("the seed stays in the workspace's container: %q", got)
	}
	hist, err := h.Client.History(ctx, "from-a", "default")
	if err != nil || len(hist) < 2 || !strings.Contains(hist[0].Command, "/usr/local/bin/tool") {
		t.Fatalf("the session's history from the source: %d commands, %v", len(hist), err)
	}
	// Each workspace of the template is its own: a's changes are not b's,
	// and a restart of a's agent plants nothing over its files again.
	h.Out("from-a", "default", "echo changed > /workspace/sub/one.txt; rm /workspace/link")
	b := h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "from-b", Template: name})
	if got := h.Out(b.Name, "default", "cat /workspace/sub/one.txt; readlink /workspace/link"); got != "one\n/etc/shadow\n" {
		t.Fatalf("the second workspace of the template: %q", got)
	}
	if _, err := h.Client.StopWorkspace(ctx, "from-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Client.StartWorkspace(ctx, "from-a"); err != nil {
		t.Fatal(err)
	}
	if got := h.Out("from-a", "default", "cat /workspace/sub/one.txt; test -e /workspace/link || echo gone"); got != "changed\ngone\n" {
		t.Fatalf("after a restart the template's files came back over the workspace's: %q", got)
	}

	// What cannot be saved, or used so, says why.
	if _, err := h.Client.SnapshotWorkspace(ctx, "src", client.SnapshotWorkspaceRequest{Name: name}); !IsCode(err, client.CodeConflict) || !strings.Contains(err.Error(), "template rm") {
		t.Fatalf("a second snapshot of the same name: %v, want a 409 that says how", err)
	}
	if _, err := h.Client.SnapshotWorkspace(ctx, "src", client.SnapshotWorkspaceRequest{Name: "Bad/Name"}); !IsCode(err, client.CodeInvalid) {
		t.Fatalf("a bad name: %v, want a 400", err)
	}
	if _, err := h.Client.SnapshotWorkspace(ctx, "src", client.SnapshotWorkspaceRequest{}); !IsCode(err, client.CodeInvalid) {
		t.Fatalf("no name: %v, want a 400", err)
	}
	if _, err := h.Client.SnapshotWorkspace(ctx, "no-such-workspace", client.SnapshotWorkspaceRequest{Name: name + "-x"}); !IsCode(err, client.CodeNotFound) {
		t.Fatalf("no such workspace: %v, want a 404", err)
	}
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "secretive", SecretEnv: map[string]string{"API_KEY": "s3cret"}})
	h.Out("secretive", "default", "echo $API_KEY > /dev/null")
	if _, err := h.Client.SnapshotWorkspace(ctx, "secretive", client.SnapshotWorkspaceRequest{Name: name + "-s"}); !IsCode(err, client.CodeInvalid) || !strings.Contains(err.Error(), "secret") {
		t.Fatalf("a workspace with secret env: %v, want a 400 that says why", err)
	}
	if _, err := h.Client.GetTemplate(ctx, name+"-s"); !IsCode(err, client.CodeNotFound) {
		t.Fatalf("a refused snapshot left a template: %v", err)
	}
	repo := GitRepo(t, map[string]string{"a.txt": "a\n"})
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "from-repo", Repo: repo})
	if _, err := h.Client.SnapshotWorkspace(ctx, "from-repo", client.SnapshotWorkspaceRequest{Name: name + "-r"}); !IsCode(err, client.CodeInvalid) || !strings.Contains(err.Error(), "fork") {
		t.Fatalf("a repository workspace: %v, want a 400 that says to fork it", err)
	}
	if _, err := h.Client.CreateWorkspace(ctx, client.CreateWorkspaceRequest{Name: "with-repo", Template: name, Repo: repo}); !IsCode(err, client.CodeInvalid) || !strings.Contains(err.Error(), "without repo") {
		t.Fatalf("a repository workspace from a saved workspace: %v, want a 400 that says why", err)
	}
	// Nothing of the snapshot's work is left on the engine.
	left, err := dc.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", template.LabelBuild+"=snapshot"))})
	if err != nil || len(left) != 0 {
		t.Fatalf("the snapshot's work containers are left: %d, %v", len(left), err)
	}
	// A template in use is not removed; once its workspaces go, it is.
	if err := h.Client.DeleteTemplate(ctx, name); !IsCode(err, client.CodeConflict) {
		t.Fatalf("remove a template in use: %v, want a 409", err)
	}
	for _, w := range []string{"from-a", b.Name} {
		if err := h.Client.DeleteWorkspace(ctx, w, client.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Client.DeleteTemplate(ctx, name); err != nil {
		t.Fatalf("remove the template: %v", err)
	}
	if _, err := dc.ImageInspect(ctx, tpl.ImageID); err == nil {
		t.Fatalf("the template's image %s is still there", tpl.ImageID)
	}
}

// TestHostileSnapshot: a workspace that writes more than the sidecar lets
// a snapshot copy (in /workspace, or a sparse file in its container's
// own filesystem) is refused (413) without filling the engine's storage,
// without leaving a template or a work container, and without leaving
// the workspace paused; what a workspace plants in its own container to
// be planted in others (a seed of its own, a marker, links out of its
// files) reaches only the workspaces of its own template, as links.
func TestHostileSnapshot(t *testing.T) {
	cleanupTemplate := templateCleanup(t)
	h := StartWith(t, t.TempDir(), fmt.Sprintf("e2e-%d", time.Now().UnixNano()), nil, []string{"--snapshot-max-mb", "8"})
	ctx := context.Background()
	dc := dockerClient(t)
	stamp := time.Now().UnixNano()
	big, small := fmt.Sprintf("big-%d", stamp), fmt.Sprintf("small-%d", stamp)
	cleanupTemplate(big)
	cleanupTemplate(small)

	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "hog"})
	h.Out("hog", "default", "head -c 20M /dev/urandom > /workspace/blob")
	_, err := h.Client.SnapshotWorkspace(ctx, "hog", client.SnapshotWorkspaceRequest{Name: big})
	if !IsCode(err, client.CodeTooLarge) || !strings.Contains(err.Error(), "8 MiB") {
		t.Fatalf("a workspace over the bound: %v, want a 413 naming it", err)
	}
	if _, err := h.Client.GetTemplate(ctx, big); !IsCode(err, client.CodeNotFound) {
		t.Fatalf("a refused snapshot left a template: %v", err)
	}
	left, err := dc.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", template.LabelBuild+"=snapshot"))})
	if err != nil || len(left) != 0 {
		t.Fatalf("a refused snapshot left %d work containers (%v)", len(left), err)
	}
	if got := h.Out("hog", "default", "echo alive"); got != "alive\n" {
		t.Fatalf("the workspace after a refused snapshot: %q", got)
	}
	// A sparse file in the container's own filesystem takes no disk in
	// the workspace, but a commit writes it whole: it counts at its
	// length, before the commit.
	h.Out("hog", "default", "rm /workspace/blob; truncate -s 2G /root/sparse")
	_, err = h.Client.SnapshotWorkspace(ctx, "hog", client.SnapshotWorkspaceRequest{Name: big})
	if !IsCode(err, client.CodeTooLarge) || !strings.Contains(err.Error(), "8 MiB") {
		t.Fatalf("a workspace with a sparse file over the bound: %v, want a 413 naming it", err)
	}
	if _, err := h.Client.GetTemplate(ctx, big); !IsCode(err, client.CodeNotFound) {
		t.Fatalf("a refused snapshot left a template: %v", err)
	}
	if got := h.Out("hog", "default", "rm /root/sparse; echo alive"); got != "alive\n" {
		t.Fatalf("the workspace after a refused snapshot: %q", got)
	}
	// A sidecar killed while it saves a workspace leaves its container
	// paused: the next sidecar unpauses it, the session intact.
	hog, err := h.Client.GetWorkspace(ctx, "hog")
	if err != nil {
		t.Fatal(err)
	}
	h.Out("hog", "default", "export KEPT=1")
	h.Kill9()
	if err := dc.ContainerPause(ctx, hog.ContainerID); err != nil {
		t.Fatal(err)
	}
	// What it left half-way: the image committed from the workspace and
	// the helper container made from it (as a snapshot labels them).
	mine := func(build string) map[string]string {
		return map[string]string{template.LabelBuild: build, pcontainer.LabelStateDir: h.StateDir, pcontainer.LabelManaged: "1"}
	}
	left0, err := dc.ContainerCreate(ctx, &container.Config{Image: "patina/base:bookworm", Cmd: []string{"true"}, Labels: mine("snapshot-base")}, nil, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	base, err := dc.ContainerCommit(ctx, left0.ID, container.CommitOptions{Config: &container.Config{Labels: mine("snapshot-base")}})
	_ = dc.ContainerRemove(ctx, left0.ID, container.RemoveOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	helper, err := dc.ContainerCreate(ctx, &container.Config{Image: base.ID, Cmd: []string{"true"}, Labels: mine("snapshot")}, nil, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	h.Launch()
	if _, err := dc.ContainerInspect(ctx, helper.ID); err == nil {
		t.Fatal("the helper container an interrupted snapshot left is still there after a restart")
	}
	if _, err := dc.ImageInspect(ctx, base.ID); err == nil {
		t.Fatal("the image an interrupted snapshot left is still there after a restart")
	}
	if got := h.Out("hog", "default", "echo alive $KEPT"); got != "alive 1\n" {
		t.Fatalf("the workspace left paused, after a restart: %q", got)
	}

	// The workspace plants, in its own container, what would be planted in
	// a workspace of its template: links out of its files and state, a
	// marker saying "already planted" in its state (to leave the next
	// workspace without its files), a seed of its own. Links stay links,
	// the marker is not carried, and none of it reaches a workspace not
	// made from its template.
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "planter"})
	h.Out("planter", "default", strings.Join([]string{
		"ln -s / /workspace/root-link && ln -s /.patina/state /workspace/state-link && ln -s /etc /.patina/state/etc-link",
		"touch /.patina/state/seed.done",
		"mkdir -p /.patina/seed/workspace && echo planted > /.patina/seed/workspace/planted",
	}, "\n"))
	if _, err := h.Client.SnapshotWorkspace(ctx, "planter", client.SnapshotWorkspaceRequest{Name: small}); err != nil {
		t.Fatal(err)
	}
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "victim", Template: small})
	got := h.Out("victim", "default", "readlink /workspace/root-link /workspace/state-link /.patina/state/etc-link; test -f /etc/passwd && echo etc-intact; echo done")
	if got != "/\n/.patina/state\n/etc\netc-intact\ndone\n" {
		t.Fatalf("a workspace of the planter's template: %q", got)
	}
	// A workspace of the default image got nothing of it.
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "bystander"})
	if got := h.Out("bystander", "default", "ls -A /workspace; test -e /.patina/seed && echo seed; echo done"); got != "done\n" {
		t.Fatalf("a bystander workspace: %q", got)
	}
}
