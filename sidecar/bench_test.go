package sidecar

import (
	"context"
	"io"
	"sort"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/patina-dev/patina/sidecar/client"
	"github.com/patina-dev/patina/sidecar/workspace"
)

// dockerExecTrue runs `true` in a container as a client of the Docker API
// would: exec create, attach, read to EOF, inspect.
func dockerExecTrue(ctx context.Context, api DockerAPI, id string) error {
	ex, err := api.ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: []string{"true"}, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return err
	}
	att, err := api.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		return err
	}
	_, err = stdcopy.StdCopy(io.Discard, io.Discard, att.Reader)
	att.Close()
	if err != nil {
		return err
	}
	for {
		ins, err := api.ContainerExecInspect(ctx, ex.ID)
		if err != nil || !ins.Running {
			return err
		}
		time.Sleep(time.Millisecond)
	}
}

// BenchmarkHTTPExecTrue: exec of `true` through the HTTP API (one
// keep-alive connection, sequential), against the baselines of one Docker
// API exec (create + attach + inspect) in the same container, and of the
// same exec through the workspace domain in this process (no HTTP),
// alternating with the HTTP ones, same run.
//
//	go test -run '^$' -bench HTTPExec -benchtime 2000x ./sidecar/
func BenchmarkHTTPExecTrue(b *testing.B) {
	svc, c := newService(b)
	ctx := context.Background()
	ws, err := c.CreateWorkspace(ctx, client.CreateWorkspaceRequest{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		if _, err := c.Exec(ctx, "bench", "default", client.ExecRequest{Command: "true"}); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([]time.Duration, 0, b.N)
	dom := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		res, err := c.Exec(ctx, "bench", "default", client.ExecRequest{Command: "true"})
		lat = append(lat, time.Since(t0))
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("%v %+v", err, res)
		}
		t0 = time.Now()
		dres, err := svc.mgr.Exec(ctx, "bench", "default", workspace.ExecRequest{Command: "true"})
		dom = append(dom, time.Since(t0))
		if err != nil || dres.ExitCode != 0 {
			b.Fatalf("domain exec: %v %+v", err, dres)
		}
	}
	b.StopTimer()
	base := make([]time.Duration, 0, 50)
	for i := 0; i < 50; i++ {
		t0 := time.Now()
		if err := dockerExecTrue(ctx, svc.docker, ws.ContainerID); err != nil {
			b.Fatal(err)
		}
		base = append(base, time.Since(t0))
	}
	p50, p90, dp50, bp50 := pct(lat, 50), pct(lat, 90), pct(dom, 50), pct(base, 50)
	b.ReportMetric(float64(p50)/1e6, "p50-ms")
	b.ReportMetric(float64(p90)/1e6, "p90-ms")
	b.ReportMetric(float64(dp50)/1e6, "domain-p50-ms")
	b.ReportMetric(float64(bp50)/1e6, "docker-exec-p50-ms")
	b.ReportMetric(float64(bp50)/float64(p50), "x-faster")
	b.Logf("HTTP exec true: p50 %s p90 %s (n=%d); without HTTP p50 %s (HTTP adds %s); docker exec p50 %s; %.0fx", p50, p90, len(lat), dp50, p50-dp50, bp50, float64(bp50)/float64(p50))
}

func pct(d []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[(len(s)-1)*p/100]
}
