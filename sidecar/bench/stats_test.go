package bench

import (
	"strings"
	"testing"
	"time"
)

func TestSummarise(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- { // 1..100 ms, unsorted
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	got := summarise(ds)
	exp := Latency{Samples: 100, P50MS: 50, P90MS: 90, P99MS: 99, MaxMS: 100, MeanMS: 50.5}
	if got != exp {
		t.Errorf("exp %+v, got %+v", exp, got)
	}
	if ds[0] != 100*time.Millisecond {
		t.Error("summarise sorted its input in place")
	}
	if got := summarise(nil); got != (Latency{}) {
		t.Errorf("exp zero for no samples, got %+v", got)
	}
	one := summarise([]time.Duration{3 * time.Millisecond})
	if one.P50MS != 3 || one.P99MS != 3 || one.Samples != 1 {
		t.Errorf("exp every percentile 3 ms for one sample, got %+v", one)
	}
}

func TestParseVmRSS(t *testing.T) {
	status := "Name:\tpatina\nVmPeak:\t  900000 kB\nVmRSS:\t   12345 kB\nThreads:\t7\n"
	got, err := parseVmRSS([]byte(status))
	if err != nil || got != 12345*1024 {
		t.Errorf("exp %d, got %d, %v", 12345*1024, got, err)
	}
	for _, bad := range []string{"Name:\tx\n", "VmRSS:\t12 MB\n", "VmRSS:\tlots kB\n"} {
		if _, err := parseVmRSS([]byte(bad)); err == nil {
			t.Errorf("parseVmRSS(%q): exp an error", bad)
		}
	}
}

func TestCleanEnv(t *testing.T) {
	got := cleanEnv([]string{"PATH=/bin", "PATINA_TOKEN=x", "PATINA_ADDR=y", "HOME=/root"})
	if len(got) != 2 || got[0] != "PATH=/bin" || got[1] != "HOME=/root" {
		t.Errorf("exp PATH and HOME only, got %v", got)
	}
}

// The agent's memory is its own process's, not the init's that started it.
func TestIsAgentServe(t *testing.T) {
	for _, c := range []struct {
		args string
		want bool
	}{
		{"/.patina/bin/patina agent serve --workspace-id x", true},
		{"/.patina/bin/patina agent pause --once -- agent serve --workspace-id x", false},
		{"/.patina/bin/patina agent pause", false},
		{"bash --noprofile --norc -i", false},
		{"", false},
	} {
		if got := isAgentServe(strings.Fields(c.args)); got != c.want {
			t.Errorf("isAgentServe(%q) = %v, want %v", c.args, got, c.want)
		}
	}
}
