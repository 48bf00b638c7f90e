package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	pclient "github.com/patina-dev/patina/sidecar/client"
)

// Resume times a workspace that idle stop stopped to the result of its
// next exec (which resumes it), and checks that its shell state came back
// with it, for each of idle stop's stages: paused (its first: the
// container frozen, processes kept; issue 28's target: p50 ≤ 300 ms) and
// stopped (after twice idle_stop: the container started again, each
// session a new shell with its state).
type Resume struct {
	// Latency is resuming a paused workspace.
	Latency
	// Stopped is resuming a stopped one.
	Stopped Latency `json:"stopped"`
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
	// resumeStopWait bounds waiting for idle stop to reach a stage;
	// resumePoll is how often the status is read meanwhile.
	resumeStopWait = 2 * time.Minute
	resumePoll     = 50 * time.Millisecond
)

// resume makes a workspace with the shortest idle stop, sets its shell's
// directory and a variable, then CreateSamples times waits for idle stop
// to pause it and times the exec that resumes it, and half as many times
// (at least once) waits for idle stop to stop it and times that exec.
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
	sample := func(n int, paused bool) (Latency, error) {
		ds := make([]time.Duration, 0, n)
		for range n {
			if err := r.waitIdleStopped(ctx, ws.ID, paused); err != nil {
				return Latency{}, err
			}
			t0 := time.Now()
			res, err := r.c.Exec(ctx, ws.ID, "default", pclient.ExecRequest{Command: `echo "$PATINA_BENCH_RESUME $PWD"`})
			d := time.Since(t0)
			if err != nil {
				return Latency{}, fmt.Errorf("the exec that resumes the workspace: %w", err)
			}
			if strings.TrimSpace(res.Stdout) != "kept /tmp" {
				out.StateKept = false
			}
			ds = append(ds, d)
		}
		return summarise(ds), nil
	}
	if out.Latency, err = sample(r.o.CreateSamples, true); err != nil {
		return out, err
	}
	out.Stopped, err = sample(max(1, r.o.CreateSamples/2), false)
	return out, err
}

// waitIdleStopped waits until idle stop has paused workspace id (paused),
// or stopped its container.
func (r *runner) waitIdleStopped(ctx context.Context, id string, paused bool) error {
	ctx, cancel := context.WithTimeout(ctx, resumeStopWait)
	defer cancel()
	stage := "stop"
	if paused {
		stage = "pause"
	}
	for {
		ws, err := r.c.GetWorkspace(ctx, id)
		if err == nil && ws.IdleStopped && ws.IdlePaused == paused {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("idle stop did not %s workspace %s within %s (idle_stop %s)", stage, id, resumeStopWait, resumeIdleStop)
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
