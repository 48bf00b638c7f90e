package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	pclient "github.com/patina-dev/patina/sidecar/client"
)

// Resume times a workspace that idle stop stopped to the result of its
// next exec (which starts it again), and checks that its shell state came
// back with it. Issue 28's target: p50 ≤ 300 ms.
type Resume struct {
	Latency
	// StateKept: every resumed shell still had the directory and the
	// variable set before the first stop.
	StateKept bool `json:"state_kept"`
}

// TargetResumeP50MS is issue 28's figure for resume after idle stop.
const TargetResumeP50MS = 300

// Resume timings.
const (
	// resumeIdleStop is the workspace's idle_stop: the shortest there is.
	resumeIdleStop = "1s"
	// resumeStopWait bounds waiting for idle stop to stop the workspace;
	// resumePoll is how often its status is read meanwhile.
	resumeStopWait = time.Minute
	resumePoll     = 50 * time.Millisecond
)

// resume makes a workspace with the shortest idle stop, sets its shell's
// directory and a variable, and CreateSamples times waits for idle stop
// and times the exec that resumes it.
func (r *runner) resume(ctx context.Context) (Resume, error) {
	out := Resume{StateKept: true}
	ws, err := r.c.CreateWorkspace(ctx, pclient.CreateWorkspaceRequest{Name: "bench-resume", Image: r.o.Image, IdleStop: resumeIdleStop})
	if err != nil {
		return out, fmt.Errorf("create workspace bench-resume: %w", err)
	}
	r.track(ws.ID)
	defer func() { _ = r.deleteWorkspace(context.WithoutCancel(ctx), ws.ID) }()
	if err := r.out(ctx, ws.ID, "cd /tmp && export PATINA_BENCH_RESUME=kept"); err != nil {
		return out, err
	}
	ds := make([]time.Duration, 0, r.o.CreateSamples)
	for i := 0; i < r.o.CreateSamples; i++ {
		if err := r.waitIdleStopped(ctx, ws.ID); err != nil {
			return out, err
		}
		t0 := time.Now()
		res, err := r.c.Exec(ctx, ws.ID, "default", pclient.ExecRequest{Command: `echo "$PATINA_BENCH_RESUME $PWD"`})
		d := time.Since(t0)
		if err != nil {
			return out, fmt.Errorf("the exec that resumes the workspace: %w", err)
		}
		if strings.TrimSpace(res.Stdout) != "kept /tmp" {
			out.StateKept = false
		}
		ds = append(ds, d)
	}
	out.Latency = summarise(ds)
	return out, nil
}

// waitIdleStopped waits until idle stop has stopped workspace id.
func (r *runner) waitIdleStopped(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, resumeStopWait)
	defer cancel()
	for {
		ws, err := r.c.GetWorkspace(ctx, id)
		if err == nil && ws.IdleStopped {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("idle stop did not stop workspace %s within %s (idle_stop %s)", id, resumeStopWait, resumeIdleStop)
		case <-time.After(resumePoll):
		}
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
