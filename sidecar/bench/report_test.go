package bench

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func sampleReport() Report {
	r := Report{
		Version: "v1", Image: "patina/base:bookworm", CPUs: 2,
		StartedAt:         time.Date(2026, 11, 21, 5, 0, 0, 0, time.UTC),
		DurationMS:        12345,
		HTTPExec:          Latency{Samples: 1000, P50MS: 0.25, P90MS: 0.3, P99MS: 0.6},
		HTTPConnections:   1,
		DockerExec:        Latency{Samples: 50, P50MS: 40, P90MS: 50},
		CreateToFirstExec: Latency{Samples: 5, P50MS: 600, MaxMS: 800},
		Concurrent:        Concurrent{Sessions: 100, ExecsPerSession: 100, Execs: 10000, ElapsedMS: 4000, ExecsPerSecond: 2500},
		RSS:               RSS{StartBytes: 12e6, SessionsBytes: 20e6, IdleBytes: 25e6, Sessions: 100, AfterLoadBytes: 60e6},
		AgentRSSBytes:     9e6,
		Stream:            Transfer{Bytes: 1e9, MS: 2000, MBPerSecond: 500},
		Diff:              Transfer{Bytes: 300e6, MS: 9000, MBPerSecond: 33},
		RelayExec:         Latency{Samples: 200, P50MS: 1.2, P90MS: 1.5},
		GitStatus:         GitStatus{Files: 10000, WorkspaceMS: 60, RepoMS: 58, Ratio: 60.0 / 58},
		Memory:            Memory{BaseBytes: 22e6, Execs: 40, OutputBytes: 4e6, OutputsPeakBytes: 55e6, Connections: 1000, ForwardsPeakBytes: 45e6},
		Egress: Egress{ProxyGet: Latency{Samples: 500, P50MS: 0.9}, DirectGet: Latency{Samples: 500, P50MS: 0.5},
			ProxyBytes: Transfer{Bytes: 512e6, MBPerSecond: 600}, DirectBytes: Transfer{Bytes: 512e6, MBPerSecond: 900}, ThroughputRatio: 600.0 / 900},
	}
	r.judge()
	return r
}

func TestJudge(t *testing.T) {
	r := sampleReport()
	if r.Speedup != 160 {
		t.Errorf("exp speed-up 160, got %g", r.Speedup)
	}
	if !r.Pass() || len(r.Checks) != 12 {
		t.Fatalf("exp 12 passing checks, got %+v", r.Checks)
	}
	tests := []struct {
		name  string
		spoil func(*Report)
		check int
	}{
		{"slow exec", func(r *Report) { r.HTTPExec.P50MS, r.DockerExec.P50MS = 0.6, 100 }, 0},
		{"small speed-up", func(r *Report) { r.DockerExec.P50MS = 10 }, 1},
		{"slow create", func(r *Report) { r.CreateToFirstExec.P50MS = 1001 }, 2},
		{"no create samples", func(r *Report) { r.CreateToFirstExec = Latency{} }, 2},
		{"slow concurrent", func(r *Report) { r.Concurrent.ExecsPerSecond = 1999 }, 3},
		{"errors", func(r *Report) { r.Concurrent.Errors = 1 }, 4},
		{"fat", func(r *Report) { r.RSS.IdleBytes = 50_000_001 }, 5},
		{"no RSS", func(r *Report) { r.RSS.IdleBytes = 0 }, 5},
		{"fat agent", func(r *Report) { r.AgentRSSBytes = 15_000_001 }, 6},
		{"no agent RSS", func(r *Report) { r.AgentRSSBytes = 0 }, 6},
		{"fat after load", func(r *Report) { r.RSS.AfterLoadBytes = 100_000_001 }, 7},
		{"slow git status", func(r *Report) { r.GitStatus.Ratio = 1.51 }, 8},
		{"no git status", func(r *Report) { r.GitStatus.Ratio = 0 }, 8},
		{"fat under outputs", func(r *Report) { r.Memory.OutputsPeakBytes = 100_000_001 }, 9},
		{"no outputs peak", func(r *Report) { r.Memory.OutputsPeakBytes = 0 }, 9},
		{"fat under forwards", func(r *Report) { r.Memory.ForwardsPeakBytes = 100_000_001 }, 10},
		{"slow egress proxy", func(r *Report) { r.Egress.ThroughputRatio = 0.49 }, 11},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := sampleReport()
			tt.spoil(&r)
			r.judge()
			for i, c := range r.Checks {
				if c.Pass == (i == tt.check) {
					t.Errorf("check %d (%s): exp pass=%v", i, c.Name, i != tt.check)
				}
			}
			if r.Pass() {
				t.Error("exp the report to fail")
			}
		})
	}
}

func TestWriteText(t *testing.T) {
	r := sampleReport()
	r.Concurrent.Errors = 2
	r.Concurrent.FirstError = "session c007: busy"
	r.judge()
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, exp := range []string{
		"FIGURE", "TARGET", "RESULT",
		"HTTP exec p50", "0.250 ms", "≤ 0.5 ms", "PASS",
		"160×", "≥ 75×",
		"600.0 ms", "≤ 1 s",
		"concurrent exec/s (100 × 100)", "2500/s", "≥ 2000/s",
		"concurrent errors", "MISS",
		"sidecar RSS, 100 idle sessions", "25.0 MB", "≤ 50.0 MB",
		"agent RSS, 100 idle sessions", "9.0 MB", "≤ 15.0 MB",
		"sidecar RSS after 1000.0 MB of output and a 300.0 MB diff", "60.0 MB", "≤ 100.0 MB",
		"git status, workspace ÷ repository (10000 files)", "1.03×", "≤ 1.5×",
		"exec p50 / p90 via the exec relay (200 samples)", "1.200 ms",
		"sidecar RSS peak, 40 execs at once writing 2 × 4.0 MB each", "55.0 MB",
		"sidecar RSS peak, 1000 forwarded connections never read", "45.0 MB",
		"first concurrent error: session c007: busy",
		"some targets missed",
	} {
		if !strings.Contains(got, exp) {
			t.Errorf("exp %q in\n%s", exp, got)
		}
	}
	for _, line := range strings.Split(got, "\n") {
		if strings.HasSuffix(line, " ") {
			t.Errorf("trailing spaces in %q", line)
		}
	}
}

func TestReportJSON(t *testing.T) {
	r := sampleReport()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"http_exec", "docker_exec", "speedup", "create_to_first_exec", "concurrent", "rss", "checks",
		"agent_rss_bytes", "stream", "diff", "relay_exec", "git_status", "egress", "memory"} {
		if _, ok := m[k]; !ok {
			t.Errorf("exp key %q in %s", k, b)
		}
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil || back.HTTPExec != r.HTTPExec || back.GitStatus != r.GitStatus || back.Memory != r.Memory || len(back.Checks) != 12 {
		t.Errorf("exp a round trip, got %+v, %v", back, err)
	}
}
