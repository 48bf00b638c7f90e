package tests

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/patina-dev/patina/sidecar/client"
)

// poolFills counts the log's lines of a pooled workspace of tpl made
// ready ("": the default image).
func poolFills(log, tpl string) int {
	key := "template=" + tpl + " ready="
	if tpl == "" {
		key = `template="" ready=`
	}
	return strings.Count(log, key)
}

// TestWarmPoolRepository: with `serve --warm-template NAME=1` for the
// template an operator built and named from a repository's
// devcontainer.json, and `--warm 1`, a repository create takes a pooled
// workspace: the devcontainer's environment, the create's env, its
// branch, the repository's files at its base, and the git round trip to
// a merge. As an attacker in it: the objects it was shipped are its base's
// only (a commit of the user's on another branch is not readable through
// any object directory in the workspace); the next user's pooled
// workspace has none of its files, processes or env. It forks. A create the
// repository refuses costs no pooled workspace. A repository workspace of
// the pool survives a kill -9 of the sidecar with its uncommitted work.
func TestWarmPoolRepository(t *testing.T) {
	track := templateCleanup(t)
	name := fmt.Sprintf("proj-%d", time.Now().UnixNano())
	track(name)
	repo := GitRepo(t, map[string]string{
		"README": "proj\n",
		".devcontainer/devcontainer.json": `{"build": {"dockerfile": "Dockerfile"}, "containerEnv": {"PROJECT_ENV": "from-devcontainer"},
 "postCreateCommand": "printf '#!/bin/sh\\necho projtool\\n' > /usr/local/bin/projtool && chmod +x /usr/local/bin/projtool"}`,
		".devcontainer/Dockerfile": "FROM patina/base:bookworm\n# " + name + "\nRUN echo built > /opt/built\n",
	})
	// A commit of the user's that no workspace's base reaches.
	git := func(dir string, args ...string) string { t.Helper(); return strings.TrimSpace(gitIn(t, dir, args...)) }
	git(repo, "checkout", "-q", "-b", "private")
	commitFiles(t, repo, map[string]string{"secret.txt": "private-" + name + "\n"})
	secret := git(repo, "rev-parse", "HEAD")
	git(repo, "checkout", "-q", "main")
	plain := GitRepo(t, map[string]string{"a.txt": "a\n"})

	h := StartWith(t, t.TempDir(), fmt.Sprintf("e2e-%d", time.Now().UnixNano()), nil, []string{"--warm", "1", "--warm-template", name + "=1"})
	ctx := context.Background()
	bctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	tpl, err := h.Client.BuildTemplate(bctx, client.BuildTemplateRequest{Repo: repo, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	pooled := func(tpl string, n int) {
		t.Helper()
		WaitFor(t, fmt.Sprintf("%d fills of template %q's pool", n, tpl), 3*time.Minute, func() bool { return poolFills(h.Logs(), tpl) >= n })
	}
	pooled(name, 1)
	pooled("", 1)

	// Refused by the repository: a 400, and the pooled workspace stays.
	var apiErr *client.APIError
	if _, err := h.Client.CreateWorkspace(ctx, client.CreateWorkspaceRequest{Name: "nobase", Repo: repo, Base: "no-such-branch"}); !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest {
		t.Fatalf("a create of a base the repository does not have: %v, want a 400", err)
	}

	a := h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "user-a", Repo: repo, Env: map[string]string{"MINE": "a"}})
	track(a.Template)
	WaitFor(t, "the log of user-a's create", 30*time.Second, func() bool { return strings.Contains(h.Logs(), "name=user-a") })
	if !logLine(h.Logs(), `msg="workspace created from the warm pool"`, "workspace_id="+a.ID) || a.Branch != "patina/user-a" || !strings.HasPrefix(a.Template, "dc-") {
		t.Fatalf("a create of the repository did not take the template's pooled workspace: %+v", a)
	}
	if n := strings.Count(h.Logs(), `msg="workspace created from the warm pool"`); n != 1 {
		t.Fatalf("%d creates took a pooled workspace, want 1 (the refused one took none)", n)
	}
	if a.Image != "patina-template:"+a.Template || tpl.ImageID == "" {
		t.Fatalf("user-a's image %q (template %+v)", a.Image, tpl)
	}
	got := h.Out("user-a", "default", "cd /workspace && cat README && git log --format=%s && git branch --show-current && git status --porcelain && echo $PROJECT_ENV $MINE && projtool && cat /opt/built")
	if want := "proj\ninitial\npatina/user-a\nfrom-devcontainer a\nprojtool\nbuilt\n"; got != want {
		t.Fatalf("the pooled workspace given the repository: %q, want %q", got, want)
	}
	// The attacker looks for the user's private commit through every
	// object directory it can find.
	probe := func(commit string) string {
		return h.Out("user-a", "default", `found=unseen; for d in $(find / -xdev -type d -name objects 2>/dev/null) /workspace/.git/objects; do
  GIT_ALTERNATE_OBJECT_DIRECTORIES=$d git -C /workspace cat-file -e `+commit+` 2>/dev/null && found=SEEN; done; echo $found`)
	}
	if got := probe(git(repo, "rev-parse", "main")); got != "SEEN\n" { // the probe finds what is there
		t.Fatalf("the probe did not find the workspace's base: %q", got)
	}
	if got := probe(secret); got != "unseen\n" {
		t.Fatalf("the user's private commit from a pooled repository workspace: %q", got)
	}
	h.Out("user-a", "default", "cd /workspace && echo a > a.txt && git add a.txt && git commit -qm from-a && echo wip > wip.txt && echo tmp > /tmp/a-tmp; (sleep 1000 &) ; export A_VAR=1")
	d, err := h.Client.Diff(ctx, "user-a")
	if err != nil || len(d.Files) != 2 {
		t.Fatalf("diff of the pooled repository workspace: %+v, %v", d, err)
	}

	// A fork of it: its files and commits, its own branch.
	f, err := h.Client.ForkWorkspace(ctx, "user-a", client.ForkWorkspaceRequest{Name: "a-fork"})
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Out("a-fork", "default", "cd /workspace && cat wip.txt && git log -1 --format=%s && git branch --show-current"); got != "wip\nfrom-a\npatina/a-fork\n" || f.Branch != "patina/a-fork" {
		t.Fatalf("the fork of a pooled repository workspace: %q (%+v)", got, f)
	}

	// The next user's pooled workspace: none of a's.
	pooled(name, 2)
	b := h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "user-b", Repo: repo})
	track(b.Template)
	if b.ContainerID == a.ContainerID {
		t.Fatal("a workspace given out was given again")
	}
	if got := h.Out("user-b", "default", "ls /workspace /tmp/a-tmp 2>&1; pgrep -x sleep || echo no-sleep; echo A_VAR=$A_VAR MINE=$MINE"); got != "ls: cannot access '/tmp/a-tmp': No such file or directory\n/workspace:\nREADME\nno-sleep\nA_VAR= MINE=\n" {
		t.Fatalf("user b's pooled workspace after user a: %q", got)
	}

	// The default pool serves a repository without a devcontainer.
	p := h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "plain", Repo: plain})
	WaitFor(t, "the log of plain's create", 30*time.Second, func() bool { return strings.Contains(h.Logs(), "name=plain") })
	if !logLine(h.Logs(), `msg="workspace created from the warm pool"`, "workspace_id="+p.ID) || p.Template != "" {
		t.Fatalf("a create of a plain repository did not take the default pooled workspace: %+v", p)
	}
	if got := h.Out("plain", "default", "cat /workspace/a.txt"); got != "a\n" {
		t.Fatalf("the plain repository's file: %q", got)
	}

	// A kill -9: user-a comes back with its work, and merges its commit.
	h.Kill9()
	h.Launch()
	if got := h.Out("user-a", "default", "cd /workspace && cat wip.txt && git log -1 --format=%s"); got != "wip\nfrom-a\n" {
		t.Fatalf("user-a after a kill -9: %q", got)
	}
	d, err = h.Client.Diff(ctx, "user-a")
	if err != nil || len(d.Files) != 2 {
		t.Fatalf("diff after a kill -9: %+v, %v", d, err)
	}
	if _, err := h.Client.Merge(ctx, "user-a", client.MergeRequest{Commit: d.Commit}); err != nil {
		t.Fatal(err)
	}
	if got := git(repo, "show", "main:a.txt"); got != "a" {
		t.Fatalf("the merged file: %q", got)
	}
}
