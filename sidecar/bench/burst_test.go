package bench

import (
	"strings"
	"testing"
	"time"
)

func TestP95(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(101-i)*time.Millisecond) // unsorted
	}
	if got := p95(ds); got != 95 {
		t.Errorf("p95 of 1..100 ms: exp 95, got %v", got)
	}
	if got := p95(ds[:1]); got != 100 {
		t.Errorf("p95 of one sample: exp it, got %v", got)
	}
	if got := p95(nil); got != 0 {
		t.Errorf("p95 of none: exp 0, got %v", got)
	}
}

// TestBurstTiny sends three creates at once to a sidecar with a warm pool
// of three, then three the pool cannot serve, against the real binary and
// engine: every create works and is timed, and nothing is left behind.
func TestBurstTiny(t *testing.T) {
	ctx, api, o, progress := tinyHostRun(t)
	rep, err := Burst(ctx, o)
	if err != nil {
		t.Fatalf("Burst: %v\nprogress:\n%s", err, progress.String())
	}
	if rep.Errors != 0 || rep.Pool.Samples != 3 || rep.NoPool.Samples != 3 {
		t.Errorf("exp 3 + 3 timed creates, got %+v", rep)
	}
	if rep.PoolP95MS < rep.Pool.P50MS || rep.PoolP95MS > rep.Pool.MaxMS || rep.NoPoolP95MS <= 0 {
		t.Errorf("inconsistent figures: %+v", rep)
	}
	var text strings.Builder
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", text.String())
	assertNoneLeft(t, api, "patina-bench-burst-")
}
