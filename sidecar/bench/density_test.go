package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	pcontainer "github.com/patina-dev/patina/sidecar/container"
	"github.com/patina-dev/patina/tests"
)

func TestParseMemAvailable(t *testing.T) {
	got, err := parseMemAvailable([]byte("MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   12345 kB\n"))
	if err != nil || got != 12345<<10 {
		t.Fatalf("exp %d, got %d, %v", 12345<<10, got, err)
	}
	for _, bad := range []string{"MemTotal: 1 kB\n", "MemAvailable: 12 MB\n", "MemAvailable: lots kB\n"} {
		if _, err := parseMemAvailable([]byte(bad)); err == nil {
			t.Errorf("parseMemAvailable(%q): exp an error", bad)
		}
	}
}

// TestDensityTiny runs the density measurement with three workspaces
// against the real binary and engine: the report's figures are consistent
// and nothing is left behind. The thousand of README's run is a command,
// not a test.
func TestDensityTiny(t *testing.T) {
	ctx, api, o, progress := tinyHostRun(t)
	rep, err := Density(ctx, o)
	if err != nil {
		t.Fatalf("Density: %v\nprogress:\n%s", err, progress.String())
	}
	if rep.Created != 3 || rep.CreateError != "" || rep.ExecErrors != 0 || rep.Exec.Samples != 3 {
		t.Errorf("exp 3 created and 3 execs, got %+v", rep)
	}
	if rep.MemorySamples != 3 || rep.MemoryBytes <= 0 || rep.MaxMemoryBytes < rep.MemoryBytes || rep.NoCacheBytes <= 0 || rep.NoCacheBytes > rep.MemoryBytes {
		t.Errorf("inconsistent memory figures: %+v", rep)
	}
	if rep.SidecarRSSBytes <= 0 || rep.SidecarRSSBeforeBytes <= 0 || rep.HostAvailableBytes <= 0 {
		t.Errorf("exp the sidecar's RSS and the host's memory, got %+v", rep)
	}
	info, err := api.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.StorageDriver != info.Driver {
		t.Errorf("exp the engine's storage driver %q, got %q", info.Driver, rep.StorageDriver)
	}
	var text strings.Builder
	if err := rep.WriteText(&text); err != nil || !strings.Contains(text.String(), "3 of 3") || !strings.Contains(text.String(), "storage driver         "+info.Driver) {
		t.Errorf("report text: %v\n%s", err, text.String())
	}
	t.Logf("\n%s", text.String())
	assertNoneLeft(t, api, "patina-bench-density-")
}

// assertNoneLeft fails when a workspace container of a run whose state
// directory's name starts with prefix is left.
func assertNoneLeft(t *testing.T, api *client.Client, prefix string) {
	t.Helper()
	cs, err := api.ContainerList(context.Background(), container.ListOptions{
		All: true, Filters: filters.NewArgs(filters.Arg("label", pcontainer.LabelStateDir)),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if strings.Contains(c.Labels[pcontainer.LabelStateDir], prefix) {
			t.Errorf("a workspace container of the run is left: %s %v", c.ID, c.Names)
		}
	}
}

// tinyHostRun is what a tiny run of Density or Burst needs: the real
// binary and engine (or a skip without Docker), a deadline, and options
// for three workspaces whose progress is kept for the failure message.
func tinyHostRun(t *testing.T) (context.Context, *client.Client, HostOptions, *strings.Builder) {
	t.Helper()
	tests.RequireDocker(t)
	bin := tests.Binary(t)
	api, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	progress := &strings.Builder{}
	return ctx, api, HostOptions{Binary: bin, Workspaces: 3, API: api, Progress: progress}, progress
}
