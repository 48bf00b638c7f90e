package tests

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dockerclient "github.com/docker/docker/client"

	"github.com/patina-dev/patina/sidecar/client"
	"github.com/patina-dev/patina/sidecar/disk"
)

// TestFork: a fork carries the source's container changes outside
// /workspace, its files with uncommitted and untracked work, its inner
// commits and a new branch at its current commit, each session's state
// (not its processes); the source is unchanged and keeps running; a
// stopped source forks too; deleting the fork removes its image; links and
// FIFOs planted in the source stay links and FIFOs, never followed.
func TestFork(t *testing.T) {
	h := Start(t)
	ctx := context.Background()
	repo := GitRepo(t, map[string]string{"a.txt": "a\n", "sub/keep": "k\n"})
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "src", Repo: repo})
	h.Out("src", "default", strings.Join([]string{
		"printf '#!/bin/sh\\necho tool\\n' > /usr/local/bin/tool && chmod +x /usr/local/bin/tool",
		"echo one > /workspace/committed.txt && git add committed.txt && git commit -qm 'inner commit'",
		"echo changed > /workspace/a.txt",
		"echo new > /workspace/untracked.txt",
		"ln -s /etc/shadow /workspace/link && mkfifo /workspace/fifo",
		"cd /workspace/sub; export FOO=bar; greet() { echo hi $1; }; alias al='echo aliased'",
		"(sleep 1000 >/dev/null 2>&1 &)",
	}, "\n"))
	h.CreateSession("src", client.CreateSessionRequest{ID: "build", Cwd: "/tmp"})
	h.Out("src", "build", "export STAGE=2")
	time.Sleep(200 * time.Millisecond) // the idle snapshots

	dst, err := h.Client.ForkWorkspace(ctx, "src", client.ForkWorkspaceRequest{Name: "copy"})
	if err != nil {
		t.Fatal(err)
	}
	if dst.Branch != "patina/copy" || dst.ForkOf == "" || dst.Status != client.StatusRunning {
		t.Fatalf("unexpected fork: %+v", dst)
	}
	if got := h.Out("copy", "default", "tool; cd /workspace && cat a.txt committed.txt untracked.txt && readlink link && test -p fifo && echo fifo; cd /workspace/sub"); got != "tool\nchanged\none\nnew\n/etc/shadow\nfifo\n" {
		t.Fatalf("the fork's container and files: got %q", got)
	}
	if got := h.Out("copy", "default", "pwd; echo $FOO; greet you; al; git -C /workspace log --format=%s -1; git -C /workspace branch --show-current"); got != "/workspace/sub\nbar\nhi you\naliased\ninner commit\npatina/copy\n" {
		t.Fatalf("the fork's session state and repository: got %q", got)
	}
	if got := h.Out("copy", "build", "pwd; echo $STAGE"); got != "/tmp\n2\n" {
		t.Fatalf("the fork's second session: got %q", got)
	}
	if got := h.Exec("copy", "default", "pgrep -x sleep").ExitCode; got == 0 {
		t.Fatal("a process of the source was carried into the fork")
	}
	// The source: running, unchanged, its own files.
	h.Out("copy", "default", "echo fork-only > /workspace/fork.txt")
	if got := h.Out("src", "default", "pwd; echo $FOO; test -e /workspace/fork.txt || echo absent; pgrep -x sleep >/dev/null && echo sleeping"); got != "/workspace/sub\nbar\nabsent\nsleeping\n" {
		t.Fatalf("the source after the fork: got %q", got)
	}
	// On the host: the fork's branch starts at the source's recorded
	// commit, and the planted link is a link, the FIFO a FIFO.
	srcTip := gitIn(t, repo, "rev-parse", "refs/heads/patina/src")
	if got := gitIn(t, repo, "rev-parse", "refs/heads/patina/copy"); got != srcTip {
		t.Fatalf("exp patina/copy at patina/src's tip %s, got %s", srcTip, got)
	}
	if msg := strings.TrimSpace(gitIn(t, repo, "log", "--format=%s", "-1", "refs/heads/patina/copy")); msg != "inner commit" {
		t.Fatalf("exp the inner commit on the fork's branch, got %q", msg)
	}
	if target, err := os.Readlink(filepath.Join(dst.Worktree, "link")); err != nil || target != "/etc/shadow" {
		t.Fatalf("exp the planted link copied as a link, got %q %v", target, err)
	}
	if fi, err := os.Lstat(filepath.Join(dst.Worktree, "fifo")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("exp the FIFO copied as a FIFO, got %v %v", fi, err)
	}
	d, err := h.Client.Diff(ctx, "copy")
	if err != nil || !strings.Contains(d.Text, "fork-only") {
		t.Fatalf("the fork's diff: %v", err)
	}

	t.Run("stopped source", func(t *testing.T) {
		if _, err := h.Client.StopWorkspace(ctx, "src"); err != nil {
			t.Fatal(err)
		}
		if _, err := h.Client.ForkWorkspace(ctx, "src", client.ForkWorkspaceRequest{Name: "copy2"}); err != nil {
			t.Fatal(err)
		}
		if got := h.Out("copy2", "default", "pwd; echo $FOO; tool"); got != "/workspace/sub\nbar\ntool\n" {
			t.Fatalf("a fork of a stopped workspace: got %q", got)
		}
		w, _ := h.Client.GetWorkspace(ctx, "src")
		if w.Status != client.StatusStopped {
			t.Fatalf("forking a stopped workspace started it: %s", w.Status)
		}
	})

	t.Run("scratch", func(t *testing.T) {
		h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "pad"})
		h.Out("pad", "default", "echo note > /workspace/n.txt; cd /etc; export P=1")
		time.Sleep(200 * time.Millisecond)
		if _, err := h.Client.ForkWorkspace(ctx, "pad", client.ForkWorkspaceRequest{Name: "pad2"}); err != nil {
			t.Fatal(err)
		}
		if got := h.Out("pad2", "default", "cat /workspace/n.txt; pwd; echo $P"); got != "note\n/etc\n1\n" {
			t.Fatalf("a scratch fork: got %q", got)
		}
	})

	t.Run("bad requests", func(t *testing.T) {
		for _, tc := range []struct {
			path, body string
			code       int
		}{
			{"/v1/workspaces/nope/fork", `{"name":"x"}`, 404},
			{"/v1/workspaces/src/fork", `{"name":"copy"}`, 409},
			{"/v1/workspaces/src/fork", `{"name":"-rf"}`, 400},
			{"/v1/workspaces/src/fork", `{"name":1}`, 400},
		} {
			if code, body := h.Raw("POST", tc.path, "", []byte(tc.body), nil); code != tc.code {
				t.Errorf("POST %s %s: exp %d, got %d %s", tc.path, tc.body, tc.code, code, body)
			}
		}
	})

	t.Run("delete removes the fork's disk or image", func(t *testing.T) {
		dc, err := dockerclient.NewClientWithOpts(dockerclient.FromEnv, dockerclient.WithAPIVersionNegotiation())
		if err != nil {
			t.Fatal(err)
		}
		defer dc.Close()
		ref := "patina/fork:" + dst.ID
		if dst.DiskMB > 0 {
			// A fork with a disk clones its source's (the container's layer
			// included): no image is committed.
			img := filepath.Join(disk.DefaultDir, "pool", dst.ID+".img")
			if _, err := os.Stat(img); err != nil {
				t.Fatalf("exp the fork's disk %s: %v", img, err)
			}
			if _, err := dc.ImageInspect(ctx, ref); err == nil {
				t.Fatalf("exp no image committed for a fork with a disk, found %s", ref)
			}
			if err := h.Client.DeleteWorkspace(ctx, "copy", client.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(img); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the fork's disk %s is still there after its deletion: %v", img, err)
			}
			return
		}
		if _, err := dc.ImageInspect(ctx, ref); err != nil {
			t.Fatalf("exp the fork's image %s: %v", ref, err)
		}
		if err := h.Client.DeleteWorkspace(ctx, "copy", client.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := dc.ImageInspect(ctx, ref); err == nil {
			t.Fatalf("the fork's image %s is still there after its deletion", ref)
		}
	})
}
