package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	pclient "github.com/patina-dev/patina/sidecar/client"
)

// TargetBurstP95MS is issue 28's figure for a burst of creates with a warm
// pool as large as the burst: p95 to the first exec ≤ 1 s.
const TargetBurstP95MS = 1000

// Burst run timings.
const (
	// burstPoolWaitEach bounds filling the pool, per pooled workspace.
	burstPoolWaitEach = 3 * time.Second
	// burstPoolPoll is how often the pool's readiness is read.
	burstPoolPoll = 100 * time.Millisecond
	// burstCreateTimeout bounds one create and its first exec.
	burstCreateTimeout = 5 * time.Minute
)

// ownMemoryMB is the memory limit of the creates the pool cannot
// serve (the pool's workspaces have the sidecar's default, 4096 MB; one
// with its own env, secret env or network policy takes a pooled one).
const ownMemoryMB = 2048

// BurstReport: Workspaces creates sent at once, each to its first exec,
// to a sidecar whose warm pool holds as many (Pool), then as many that the
// pool cannot serve (NoPool: each with a memory limit other than the
// pool's).
type BurstReport struct {
	Workspaces int     `json:"workspaces"`
	Pool       Latency `json:"pool"`
	NoPool     Latency `json:"no_pool"`
	// P95 of each (Latency has no p95).
	PoolP95MS   float64 `json:"pool_p95_ms"`
	NoPoolP95MS float64 `json:"no_pool_p95_ms"`
	Errors      int     `json:"errors"`
	FirstError  string  `json:"first_error,omitempty"`
}

// Burst starts a sidecar with `serve --warm N`, waits for the pool to
// fill, sends N creates at once (each timed to its first exec), deletes
// them, and does the same with N creates the pool cannot serve.
func Burst(ctx context.Context, o HostOptions) (BurstReport, error) {
	rep := BurstReport{Workspaces: o.Workspaces}
	if err := o.prepare("burst"); err != nil {
		return rep, err
	}
	p, done, err := o.startOwn(ctx, "burst", "--warm", fmt.Sprint(o.Workspaces))
	if err != nil {
		return rep, err
	}
	defer done()
	c := pclient.New(p.Addr, p.Token, nil)
	fmt.Fprintf(o.Progress, "bench: burst: filling a warm pool of %d\n", o.Workspaces)
	if err := waitPoolReady(ctx, p, o.Workspaces, time.Duration(o.Workspaces)*burstPoolWaitEach); err != nil {
		return rep, err
	}
	for _, phase := range []struct {
		name     string
		memoryMB int64 // 0: the pool's; another: a create the pool cannot serve
		lat      *Latency
		p95      *float64
	}{
		{"pool", 0, &rep.Pool, &rep.PoolP95MS},
		{"nopool", ownMemoryMB, &rep.NoPool, &rep.NoPoolP95MS},
	} {
		fmt.Fprintf(o.Progress, "bench: burst: %d creates at once (%s)\n", o.Workspaces, phase.name)
		ds, ids, errs := createAtOnce(ctx, c, o, phase.name, phase.memoryMB)
		for _, err := range errs {
			rep.Errors++
			if rep.FirstError == "" {
				rep.FirstError = err.Error()
			}
		}
		*phase.lat, *phase.p95 = summarise(ds), p95(ds)
		deleteEach(context.WithoutCancel(ctx), c, ids)
		if err := ctx.Err(); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// waitPoolReady waits until the sidecar's warm pool has n workspaces ready
// to be taken (its patina_pool_ready metric): running containers are not
// enough, a pooled one is ready once its agent answers.
func waitPoolReady(ctx context.Context, p *sidecarProc, n int, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		ready, err := poolReady(ctx, p)
		if err == nil && ready >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the warm pool did not have %d workspaces ready within %s (last: %d, %v)", n, within, ready, err)
		case <-time.After(burstPoolPoll):
		}
	}
}

// poolReady reads patina_pool_ready from the sidecar's GET /metrics.
func poolReady(ctx context.Context, p *sidecarProc) (int, error) {
	return poolMetric(ctx, p, "patina_pool_ready")
}

// poolMetric reads one of the pool's figures from the sidecar's GET
// /metrics.
func poolMetric(ctx context.Context, p *sidecarProc, name string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.Addr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+p.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 1<<20))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, fmt.Errorf("GET /metrics: no %s", name)
}

// createAtOnce sends o.Workspaces creates at once, each followed by an
// exec of `true`, and returns the times of those that worked, the ids
// created and the errors.
func createAtOnce(ctx context.Context, c *pclient.Client, o HostOptions, prefix string, memoryMB int64) ([]time.Duration, []string, []error) {
	var (
		mu   sync.Mutex
		ds   []time.Duration
		ids  []string
		errs []error
		wg   sync.WaitGroup
	)
	start := make(chan struct{})
	for i := range o.Workspaces {
		wg.Go(func() {
			<-start
			cctx, cancel := context.WithTimeout(ctx, burstCreateTimeout)
			defer cancel()
			t0 := time.Now()
			w, err := c.CreateWorkspace(cctx, pclient.CreateWorkspaceRequest{Name: fmt.Sprintf("bench-burst-%s-%d", prefix, i), Image: o.Image, MemoryMB: memoryMB})
			if err == nil {
				err = execTrue(cctx, c, w.ID, "default")
			}
			d := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			if w.ID != "" {
				ids = append(ids, w.ID)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("workspace %d: %w", i+1, err))
				return
			}
			ds = append(ds, d)
		})
	}
	close(start)
	wg.Wait()
	return ds, ids, errs
}

// p95 is the 95th percentile of ds, in milliseconds (Latency has none).
func p95(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return ms(percentile(s, 95))
}

// Pass: every create worked, and with the pool p95 ≤ 1 s.
func (r BurstReport) Pass() bool {
	return r.Errors == 0 && r.Pool.Samples == r.Workspaces && r.PoolP95MS <= TargetBurstP95MS
}

// WriteText prints the burst run.
func (r BurstReport) WriteText(w io.Writer) error {
	verdict := "MISS"
	if r.Pass() {
		verdict = "PASS"
	}
	_, err := fmt.Fprintf(w, `%d creates at once → first exec, with a warm pool of %d: p50 %s, p95 %s, max %s   target p95 ≤ 1 s   %s
%d creates at once → first exec, none from the pool:      p50 %s, p95 %s, max %s
failed: %d%s
`,
		r.Workspaces, r.Workspaces, fmtMS(r.Pool.P50MS), fmtMS(r.PoolP95MS), fmtMS(r.Pool.MaxMS), verdict,
		r.Workspaces, fmtMS(r.NoPool.P50MS), fmtMS(r.NoPoolP95MS), fmtMS(r.NoPool.MaxMS),
		r.Errors, firstErr(r.FirstError))
	return err
}

func firstErr(s string) string {
	if s == "" {
		return ""
	}
	return " (first: " + s + ")"
}
