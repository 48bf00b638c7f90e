package daggerws

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/patina-dev/patina/sidecar/client"
)

func TestTable(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	got := table([]client.Workspace{
		{Name: "newer", Status: "stopped", Error: "container died:\n oom", CreatedAt: t0.Add(time.Hour)},
		{Name: "older", Status: "running", Branch: "patina/older", Repo: "/src/app", CreatedAt: t0},
	})
	exp := "" +
		"NAME   STATUS                         BRANCH        REPO      CREATED\n" +
		"older  running                        patina/older  /src/app  2026-01-02T03:04:05Z\n" +
		"newer  stopped (container died: oom)  -             -         2026-01-02T04:04:05Z\n"
	if got != exp {
		t.Errorf("exp\n%s\ngot\n%s", exp, got)
	}
	if got := table(nil); got != "no workspaces\n" {
		t.Errorf("no workspaces: exp %q, got %q", "no workspaces\n", got)
	}
}

func TestDescribe(t *testing.T) {
	got := describe(client.Workspace{Name: "w", ID: "id1", Status: "running", Image: "img"})
	exp := "name:   w\nid:     id1\nstatus: running\nimage:  img\n"
	if got != exp {
		t.Errorf("scratch: exp %q, got %q", exp, got)
	}
	got = describe(client.Workspace{Name: "w", Branch: "patina/w", Base: "refs/heads/main", BaseCommit: "0123456789abcdef", Worktree: "/wt"})
	for _, line := range []string{"base:     main (0123456789ab)\n", "branch:   patina/w\n", "worktree: /wt (on the sidecar's machine; /workspace in the container)\n"} {
		if !strings.Contains(got, line) {
			t.Errorf("repository: exp %q, got:\n%s", line, got)
		}
	}
}

// diffOnly is an API that answers Diff with d.
type diffOnly struct {
	API
	d client.Diff
}

func (f diffOnly) Diff(context.Context, string) (client.Diff, error) { return f.d, nil }

func TestDiffTruncated(t *testing.T) {
	c := diffOnly{d: client.Diff{Text: "--- a/x\n+++ b/x\n+cut", Truncated: true, Files: make([]client.FileStat, 3)}}
	got, err := Diff(context.Background(), c, DiffRequest{Workspace: "w"})
	exp := "--- a/x\n+++ b/x\n+cut\n[patina: the diff is longer than the sidecar's limit and was cut here; 3 files changed]\n"
	if err != nil || got != exp {
		t.Errorf("exp %q, got %q, %v", exp, got, err)
	}
	c.d = client.Diff{}
	if got, err := Diff(context.Background(), c, DiffRequest{Workspace: "w"}); err != nil || got != "" {
		t.Errorf("no changes: exp \"\", got %q, %v", got, err)
	}
}
