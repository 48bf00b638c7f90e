package tests

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"

	pclient "github.com/patina-dev/patina/sidecar/client"
)

// legacyCommit is the last patina before the agent: sessions driven from
// the host, a git worktree of the user's repository with its git directory
// mounted into the container.
const legacyCommit = "3f4df9e"

// legacyBinary builds patina at legacyCommit from this repository's
// history.
func legacyBinary(t *testing.T) string { return binaryAt(t, legacyCommit) }

// binaryAt builds patina at a commit of this repository's history.
func binaryAt(t *testing.T, commit string) string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(RepoRoot(), ".git")); errors.Is(err, os.ErrNotExist) {
		// A source tree without its history (the Dagger module's test
		// container gets one: .git is left out of the module's source).
		// .ci/run tests a clone, where this runs.
		t.Skipf("NOT RUN: the source at %s has no git history to build patina %s from (run it in a clone)", RepoRoot(), commit)
	}
	src := t.TempDir()
	tarball := filepath.Join(t.TempDir(), "legacy.tar")
	if out, err := exec.Command("git", "-C", RepoRoot(), "archive", "--format=tar", "-o", tarball, commit).CombinedOutput(); err != nil {
		t.Fatalf("this test needs commit %s of patina's history (a full clone): git archive: %v %s", commit, err, out)
	}
	if out, err := exec.Command("tar", "-x", "-C", src, "-f", tarball).CombinedOutput(); err != nil {
		t.Fatalf("untar: %v %s", err, out)
	}
	bin := filepath.Join(t.TempDir(), "patina-"+commit)
	build := exec.Command("go", "build", "-o", bin, "./sidecar/cmd/patina")
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build patina %s: %v\n%s", commit, err, out)
	}
	return bin
}

// Workspaces made by the previous patina (whose containers mount the
// user's git directory writable) are taken out of service when the new
// sidecar starts, and moved to the new format by start: files, commits
// made inside and uncommitted work are kept; git then works as in any
// workspace.
func TestLegacyWorkspaceMigrated(t *testing.T) {
	RequireDocker(t)
	oldBin := legacyBinary(t)
	stateDir, token := t.TempDir(), "legacy-"+fmt.Sprint(time.Now().UnixNano())
	repo := GitRepo(t, map[string]string{"a.txt": "a\n"})

	// The old sidecar: a repository workspace with a commit made inside and
	// uncommitted work, and a scratch workspace with a file.
	old := StartOld(t, oldBin, stateDir, token)
	oc := old.Client
	ctx := context.Background()
	oldRepoWS, err := oc.CreateWorkspace(ctx, pclient.CreateWorkspaceRequest{Name: "legacy", Repo: repo})
	if err != nil {
		t.Fatalf("old sidecar: create: %v\n%s", err, old.Logs())
	}
	if _, err := oc.CreateWorkspace(ctx, pclient.CreateWorkspaceRequest{Name: "oldscratch"}); err != nil {
		t.Fatal(err)
	}
	for ws, c := range map[string]string{
		"legacy":     "echo committed > c.txt && git add c.txt && git commit -qm inside && echo wip >> a.txt",
		"oldscratch": "echo data > /workspace/f",
	} {
		res, err := oc.Exec(ctx, ws, "default", pclient.ExecRequest{Command: c})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("old sidecar: exec in %s: %+v %v", ws, res, err)
		}
	}
	old.Stop(t)

	// The new sidecar on the same state directory.
	h := StartIn(t, stateDir, token, nil)
	WaitFor(t, "the legacy workspaces adopted", time.Minute, func() bool {
		wss, err := h.Client.ListWorkspaces(ctx)
		if err != nil || len(wss) != 2 {
			return false
		}
		for _, w := range wss {
			if w.Status != pclient.StatusStopped || !strings.Contains(w.Error, "upgraded") {
				return false
			}
		}
		return true
	})
	// The old container, which mounts the user's git directory, is gone.
	dc, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	if _, err := dc.ContainerInspect(ctx, oldRepoWS.ContainerID); err == nil {
		t.Fatal("the legacy container (with the user's git directory mounted) still exists")
	}
	for _, name := range []string{"legacy", "oldscratch"} {
		w, err := h.Client.StartWorkspace(ctx, name)
		if err != nil || w.Status != pclient.StatusRunning || !strings.Contains(w.Notice, "migrated") {
			t.Fatalf("start %s: %+v %v\n%s", name, w, err, lastLines(h.Logs(), 30))
		}
	}
	if got := h.Out("oldscratch", "default", "cat /workspace/f"); got != "data\n" {
		t.Fatalf("the scratch workspace's file: %q", got)
	}
	st := h.Out("legacy", "default", "cat c.txt; git status --short; git log --format=%s -1")
	if st != "committed\n M a.txt\ninside\n" {
		t.Fatalf("the migrated workspace: %q", st)
	}
	d, err := h.Client.Diff(ctx, "legacy")
	if err != nil || len(d.Files) != 2 || !d.Uncommitted {
		t.Fatalf("diff: %+v %v", d, err)
	}
	if _, err := h.Client.Commit(ctx, "legacy", pclient.CommitRequest{Message: "wip"}); err != nil {
		t.Fatal(err)
	}
	if mr, err := h.Client.Merge(ctx, "legacy", pclient.MergeRequest{}); err != nil || mr.UpToDate {
		t.Fatalf("merge: %+v %v", mr, err)
	}
	if b, err := os.ReadFile(filepath.Join(repo, "a.txt")); err != nil || string(b) != "a\nwip\n" {
		t.Fatalf("the merged work in the repository: %q %v", b, err)
	}
	if out, _ := exec.Command("git", "-C", repo, "worktree", "list").Output(); strings.Count(string(out), "\n") != 1 {
		t.Fatalf("the legacy git worktree entry survived:\n%s", out)
	}
	_ = errors.New
}
