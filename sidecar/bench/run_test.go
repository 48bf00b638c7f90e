package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"

	pcontainer "github.com/patina-dev/patina/sidecar/container"
	"github.com/patina-dev/patina/tests"
)

// TestRunTiny runs the whole benchmark in a tiny configuration against the
// real binary (built by the tests harness, as `patina bench` runs it:
// `patina serve` as a child process, whose RSS only a separate process
// shows). It checks the report's shape and the cleanup, not the targets:
// figures on a CI machine under -race say little.
func TestRunTiny(t *testing.T) {
	tests.RequireDocker(t)
	bin := tests.Binary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var progress strings.Builder
	rep, err := Run(ctx, Options{
		Binary:           bin,
		Samples:          10,
		Warmup:           3,
		DockerSamples:    3,
		CreateSamples:    2,
		Sessions:         3,
		Execs:            5,
		StreamBytes:      5 << 20,
		DiffBytes:        1 << 20,
		GitFiles:         50,
		RelaySamples:     5,
		RepoHistoryBytes: 1 << 20,
		PortSamples:      5,
		PortBytes:        1 << 20,
		ForkBytes:        2 << 20,
		MemExecs:         3,
		MemOutputBytes:   1 << 20,
		MemConnections:   20,
		Progress:         &progress,
	})
	if err != nil {
		t.Fatalf("Run: %v\nprogress:\n%s", err, progress.String())
	}
	if rep.HTTPExec.Samples != 10 || rep.DockerExec.Samples != 3 || rep.CreateToFirstExec.Samples != 2 {
		t.Errorf("unexpected sample counts: %+v", rep)
	}
	if rep.HTTPConnections != 1 {
		t.Errorf("exp the sequential execs on one keep-alive connection, got %d connections", rep.HTTPConnections)
	}
	c := rep.Concurrent
	if c.Sessions != 3 || c.ExecsPerSession != 5 || c.Execs != 15 || c.Errors != 0 || c.ExecsPerSecond <= 0 {
		t.Errorf("unexpected concurrent run: %+v", c)
	}
	if rep.RSS.StartBytes <= 0 || rep.RSS.IdleBytes <= 0 || rep.RSS.Sessions != 3 {
		t.Errorf("unexpected RSS: %+v", rep.RSS)
	}
	if rep.HTTPExec.P50MS <= 0 || rep.DockerExec.P50MS <= 0 || rep.Speedup <= 0 || len(rep.Checks) != 12 {
		t.Errorf("unexpected figures: %+v", rep)
	}
	if iw := rep.IdleWorkspace; iw.MemoryBytes <= 0 || iw.EngineMemoryBytes < iw.MemoryBytes || iw.Fit != iw.EngineMemoryBytes/iw.MemoryBytes ||
		iw.NoCacheBytes <= 0 || iw.NoCacheBytes > iw.MemoryBytes || iw.Agent != filepath.Base(bin) {
		t.Errorf("unexpected idle workspace figures: %+v", iw)
	}
	if rep.AgentRSSBytes <= 0 || rep.RSS.AfterLoadBytes <= 0 || rep.Stream.Bytes != 5<<20 || rep.Diff.MS <= 0 ||
		rep.RelayExec.Samples != 5 || rep.GitStatus.Ratio <= 0 {
		t.Errorf("unexpected new figures: agent %d, after load %d, stream %+v, diff %+v, relay %+v, git %+v",
			rep.AgentRSSBytes, rep.RSS.AfterLoadBytes, rep.Stream, rep.Diff, rep.RelayExec, rep.GitStatus)
	}
	if p := rep.Ports; p.Forwarded.Samples != 5 || p.Direct.Samples != 5 || p.ForwardedBytes.Bytes != 1<<20 ||
		p.DirectBytes.Bytes != 1<<20 || p.ThroughputRatio <= 0 {
		t.Errorf("unexpected port figures: %+v", p)
	}
	if rep.Fork.Bytes != 2<<20 || rep.Fork.MS <= 0 {
		t.Errorf("unexpected fork figure: %+v", rep.Fork)
	}
	if rep.Resume.Samples != 2 || rep.Resume.P50MS <= 0 || rep.Resume.Stopped.Samples != 1 || rep.Resume.Stopped.P50MS <= 0 || !rep.Resume.StateKept {
		t.Errorf("exp 2 resumes after idle stop's pause and 1 after its stop, each with its shell state, got %+v", rep.Resume)
	}
	if rc := rep.RepoCreate; rc.Files != 50 || rc.PackBytes < 1<<20 || rc.FirstMS <= 0 || rc.SecondMS <= 0 || rc.LaterMS <= 0 {
		t.Errorf("unexpected repository create figures: %+v", rc)
	}
	if dc := rep.Devcontainer; dc.FirstMS <= 0 || dc.SecondMS <= 0 || dc.PooledMS <= 0 || dc.Ratio <= 0 || dc.NoPoolRatio <= 0 {
		t.Errorf("unexpected devcontainer figures: %+v", dc)
	}
	if m := rep.Memory; m.Execs != 3 || m.OutputBytes != 1<<20 || m.Connections != 20 || m.BaseBytes <= 0 ||
		m.OutputsPeakBytes < m.BaseBytes || m.ForwardsPeakBytes <= 0 || m.OutputsMS <= 0 {
		t.Errorf("unexpected memory figures: %+v", m)
	}
	if rep.Version == "" {
		t.Error("exp the sidecar's version")
	}
	var text strings.Builder
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	t.Logf("tiny run (figures not judged here):\n%s", text.String())

	// Nothing is left behind: no container of the run's state directory,
	// no temporary directory.
	_, after, ok := strings.Cut(progress.String(), "state in ")
	if !ok {
		t.Fatalf("no state directory in the progress:\n%s", progress.String())
	}
	stateDir := strings.TrimSuffix(strings.Fields(after)[0], ")")
	dc, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	left, err := pcontainer.List(ctx, dc, stateDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("containers of the run left behind: %+v", left)
	}
	if _, err := os.Stat(filepath.Dir(stateDir)); !os.IsNotExist(err) {
		t.Errorf("exp %s removed, got %v", filepath.Dir(stateDir), err)
	}
}

func TestRunNeedsBinary(t *testing.T) {
	if _, err := Run(context.Background(), Options{}); err == nil || !strings.Contains(err.Error(), "Binary") {
		t.Errorf("exp an error about Options.Binary, got %v", err)
	}
}
