package session

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// Benchmarks. Figures are reported against a baseline measured in the same
// run, since this machine's speed varies:
//
//	go test -run '^$' -bench ExecTrue -benchtime 5000x ./session/
//	go test -run '^$' -bench OutputCapture -benchtime 4x ./session/
//
// (Not -bench . with a large -benchtime: each capture op writes 256 MB.)
//
// BenchmarkExecTrue: a warm exec of `true` through a session (p50, p90),
// and, as the baseline, one fork+exec of /bin/true from Go (what any
// per-command process costs before it does anything).
// BenchmarkOutputCapture: MB/s of stdout captured through a session, and
// the same command writing straight to a file as the baseline.

func BenchmarkExecTrue(b *testing.B) {
	m, err := Open(context.Background(), Config{Dir: b.TempDir(), Launcher: LocalLauncher{}})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	defer m.CloseAll(context.Background())
	s, err := m.Create(context.Background(), CreateRequest{ID: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < 50; i++ { // warm up
		if _, err := s.Exec(ctx, ExecRequest{Command: "true"}); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		res, err := s.Exec(ctx, ExecRequest{Command: "true"})
		lat = append(lat, time.Since(t0))
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exec: %v %+v", err, res)
		}
	}
	b.StopTimer()
	base := make([]time.Duration, 0, 200)
	for i := 0; i < 200; i++ {
		t0 := time.Now()
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
		base = append(base, time.Since(t0))
	}
	p50, p90 := percentile(lat, 50), percentile(lat, 90)
	bp50 := percentile(base, 50)
	b.ReportMetric(ms(p50), "p50-ms")
	b.ReportMetric(ms(p90), "p90-ms")
	b.ReportMetric(ms(bp50), "forkexec-p50-ms")
	b.ReportMetric(float64(bp50)/float64(p50), "x-faster-than-forkexec")
	b.Logf("exec true: p50 %s p90 %s over %d; baseline fork+exec /bin/true p50 %s (%.1fx)", p50, p90, len(lat), bp50, float64(bp50)/float64(p50))
}

func BenchmarkOutputCapture(b *testing.B) {
	const size = 256 << 20
	m, err := Open(context.Background(), Config{Dir: b.TempDir(), Launcher: LocalLauncher{}, KeepOutputs: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	defer m.CloseAll(context.Background())
	s, err := m.Create(context.Background(), CreateRequest{ID: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	cmd := fmt.Sprintf("head -c %d /dev/zero", size)
	ctx := context.Background()
	b.SetBytes(size)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		res, err := s.Exec(ctx, ExecRequest{Command: cmd})
		if err != nil || res.Stdout.Size != size {
			b.Fatalf("exec: %v size %d", err, res.Stdout.Size)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	// Baseline: the same bytes written straight to a file by bash.
	dst := filepath.Join(b.TempDir(), "out")
	bstart := time.Now()
	for i := 0; i < b.N; i++ {
		if err := exec.Command("bash", "-c", cmd+" >"+dst).Run(); err != nil {
			b.Fatal(err)
		}
	}
	belapsed := time.Since(bstart)
	os.Remove(dst)
	mbps := float64(size) * float64(b.N) / elapsed.Seconds() / 1e6
	bmbps := float64(size) * float64(b.N) / belapsed.Seconds() / 1e6
	b.ReportMetric(mbps, "MB/s")
	b.ReportMetric(bmbps, "direct-MB/s")
	b.ReportMetric(mbps/bmbps, "ratio-to-direct")
	b.Logf("capture %.0f MB/s; direct write %.0f MB/s (ratio %.2f)", mbps, bmbps, mbps/bmbps)
}

func percentile(d []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[(len(s)-1)*p/100]
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// BenchmarkRecoverThenExecTrue is BenchmarkExecTrue with the agent's
// per-exec Recover check (outside.go) in front: compare the two in one run.
func BenchmarkRecoverThenExecTrue(b *testing.B) {
	m, err := Open(context.Background(), Config{Dir: b.TempDir(), Launcher: LocalLauncher{}})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	defer m.CloseAll(context.Background())
	if _, err := m.Create(context.Background(), CreateRequest{ID: "bench"}); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s, _, err := m.Recover(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Exec(ctx, ExecRequest{Command: "true"}); err != nil {
			b.Fatal(err)
		}
	}
}
