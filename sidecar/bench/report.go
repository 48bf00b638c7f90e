package bench

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Targets patina promises on a machine like its CI's.
const (
	TargetHTTPExecP50MS     = 0.5  // HTTP exec of `true`, p50
	TargetSpeedup           = 75.0 // Docker exec p50 ÷ HTTP exec p50
	TargetCreateFirstExecMS = 1000 // workspace create → first exec, p50
	TargetExecsPerSecond    = 2000 // concurrent run, with 0 errors
	TargetRSSBytes          = 50_000_000
	TargetRSSAfterLoadBytes = 100_000_000 // after streaming 1 GB and a 300 MB diff
	TargetAgentRSSBytes     = 15_000_000
	TargetGitStatusRatio    = 1.5 // git status in a workspace ÷ in the repository
)

// Report is the outcome of a Run. It marshals to JSON.
type Report struct {
	// Version is the sidecar's version (from its sidecar.json).
	Version   string    `json:"version"`
	Image     string    `json:"image"`
	CPUs      int       `json:"cpus"`
	StartedAt time.Time `json:"started_at"`
	// DurationMS is the wall time of the whole run, setup included.
	DurationMS float64 `json:"duration_ms"`

	// HTTPExec: sequential execs of `true` through the HTTP API, on
	// HTTPConnections connection(s) (1: one keep-alive connection).
	HTTPExec        Latency `json:"http_exec"`
	HTTPConnections int     `json:"http_connections"`
	// DockerExec: Docker API execs of `true` (create + attach + read +
	// inspect) in the same container.
	DockerExec Latency `json:"docker_exec"`
	// Speedup is DockerExec.P50MS / HTTPExec.P50MS.
	Speedup float64 `json:"speedup"`
	// CreateToFirstExec: a scratch workspace's creation until its first
	// exec of `true` returned.
	CreateToFirstExec Latency `json:"create_to_first_exec"`

	Concurrent Concurrent `json:"concurrent"`
	RSS        RSS        `json:"rss"`
	// AgentRSSBytes is the workspace's agent's resident memory with the
	// concurrent run's sessions idle (from the engine's process list).
	AgentRSSBytes int64 `json:"agent_rss_bytes"`
	// AgentAnonBytes and AgentFileBytes split it: the agent's own memory,
	// and pages of its executable (shared, through the page cache, by
	// every agent of the engine). Zero when /proc does not show it (a
	// remote engine).
	AgentAnonBytes int64 `json:"agent_anon_bytes,omitempty"`
	AgentFileBytes int64 `json:"agent_file_bytes,omitempty"`
	// IdleWorkspace: a workspace with one idle shell, all of its
	// processes, and how many fit in the engine's memory.
	IdleWorkspace IdleWorkspace `json:"idle_workspace"`
	// Stream: a command's output streamed to the client; Diff: the diff of
	// a workspace holding a large file. RSS.AfterLoadBytes follows both.
	Stream Transfer `json:"stream"`
	Diff   Transfer `json:"diff"`
	// RelayExec: sequential execs of `true` through the exec relay (a
	// second sidecar with --agent-transport exec), the path of a remote
	// engine or a sidecar in a container.
	RelayExec Latency `json:"relay_exec"`
	// GitStatus: `git status` in a workspace against the same in the
	// user's repository, same run.
	GitStatus GitStatus `json:"git_status"`
	// Ports: a forwarded port against the container's own address.
	Ports Ports `json:"ports"`
	// Egress: the egress proxy against no proxy.
	Egress Egress `json:"egress"`
	// Fork: a fork of a workspace with Fork.Bytes installed, to its first
	// exec.
	Fork Fork `json:"fork"`
	// Resume: a workspace paused, then stopped, by idle stop to its next
	// exec's result.
	Resume Resume `json:"resume"`
	// RepoCreate: workspaces of a large repository, created to their first
	// exec.
	RepoCreate RepoCreate `json:"repo_create"`
	// Memory: the sidecar's RSS peak under a hostile workspace's loads.
	Memory Memory `json:"memory"`
	// Devcontainer: workspaces of a repository with a devcontainer.json,
	// to their first exec (the first builds the template; a second with
	// and without the template's warm pool).
	Devcontainer Devcontainer `json:"devcontainer"`
	// WarmPool: create → first exec with a warm pool, without, and docker
	// run --rm IMAGE true, same run.
	WarmPool WarmPool `json:"warm_pool"`

	// Checks are the figures judged against the targets.
	Checks []Check `json:"checks"`
}

// Concurrent is the outcome of the concurrent run.
type Concurrent struct {
	Sessions        int `json:"sessions"`
	ExecsPerSession int `json:"execs_per_session"`
	// Execs counts the execs that succeeded (exit status 0); Errors the
	// others (API errors and non-zero statuses), FirstError the first.
	Execs          int     `json:"execs"`
	Errors         int     `json:"errors"`
	FirstError     string  `json:"first_error,omitempty"`
	ElapsedMS      float64 `json:"elapsed_ms"`
	ExecsPerSecond float64 `json:"execs_per_second"`
	// Latency of each exec as its goroutine saw it.
	Latency Latency `json:"latency"`
}

// RSS is the sidecar process's resident memory (VmRSS) at three moments.
type RSS struct {
	// StartBytes: right after the sidecar started.
	StartBytes int64 `json:"start_bytes"`
	// SessionsBytes: with Sessions idle sessions, before the concurrent run.
	SessionsBytes int64 `json:"sessions_bytes"`
	// IdleBytes: with the same sessions idle again after it.
	IdleBytes int64 `json:"idle_bytes"`
	Sessions  int   `json:"sessions"`
	// AfterLoadBytes: after streaming Stream.Bytes of output and taking a
	// diff of Diff.Bytes.
	AfterLoadBytes int64 `json:"after_load_bytes"`
}

// Transfer is bytes moved in a time.
type Transfer struct {
	Bytes int64   `json:"bytes"`
	MS    float64 `json:"ms"`
	// MBPerSecond is Bytes/1e6 per second.
	MBPerSecond float64 `json:"mb_per_second"`
}

// GitStatus compares `git status` inside a workspace with the user's
// repository.
type GitStatus struct {
	Files       int     `json:"files"`
	WorkspaceMS float64 `json:"workspace_ms"` // median, inside the container
	RepoMS      float64 `json:"repo_ms"`      // median, in the repository
	Ratio       float64 `json:"ratio"`
}

// Check is one figure judged against its target.
type Check struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Target string `json:"target"`
	Pass   bool   `json:"pass"`
}

// Pass reports whether every check passed.
func (r Report) Pass() bool { return allPass(r.Checks) }

// cells is the check as a table row: name, value, target, PASS or MISS.
func (c Check) cells() []string {
	res := "PASS"
	if !c.Pass {
		res = "MISS"
	}
	return []string{c.Name, c.Value, c.Target, res}
}

// writeVerdict ends a report: whether every target was met.
func writeVerdict(w io.Writer, pass bool) error {
	verdict := "all targets met"
	if !pass {
		verdict = "some targets missed"
	}
	_, err := fmt.Fprintf(w, "\n%s\n", verdict)
	return err
}

// allPass reports whether there are checks and every one passed.
func allPass(checks []Check) bool {
	for _, c := range checks {
		if !c.Pass {
			return false
		}
	}
	return len(checks) > 0
}

// judge fills in r.Speedup and r.Checks from the figures.
func (r *Report) judge() {
	if r.HTTPExec.P50MS > 0 {
		r.Speedup = r.DockerExec.P50MS / r.HTTPExec.P50MS
	}
	c := r.Concurrent
	r.Checks = []Check{
		{"HTTP exec p50", fmtMS(r.HTTPExec.P50MS), fmt.Sprintf("≤ %g ms", TargetHTTPExecP50MS),
			r.HTTPExec.Samples > 0 && r.HTTPExec.P50MS <= TargetHTTPExecP50MS},
		{"speed-up over Docker exec (p50)", fmt.Sprintf("%.0f×", r.Speedup), fmt.Sprintf("≥ %g×", TargetSpeedup),
			r.Speedup >= TargetSpeedup},
		{"create → first exec p50", fmtMS(r.CreateToFirstExec.P50MS), fmt.Sprintf("≤ %g s", TargetCreateFirstExecMS/1000.0),
			r.CreateToFirstExec.Samples > 0 && r.CreateToFirstExec.P50MS <= TargetCreateFirstExecMS},
		{fmt.Sprintf("concurrent exec/s (%d × %d)", c.Sessions, c.ExecsPerSession), fmt.Sprintf("%.0f/s", c.ExecsPerSecond),
			fmt.Sprintf("≥ %d/s", TargetExecsPerSecond), c.ExecsPerSecond >= TargetExecsPerSecond},
		{"concurrent errors", fmt.Sprint(c.Errors), "0", c.Errors == 0 && c.Execs > 0},
		{fmt.Sprintf("sidecar RSS, %d idle sessions", r.RSS.Sessions), fmtBytes(r.RSS.IdleBytes),
			"≤ " + fmtBytes(TargetRSSBytes), r.RSS.IdleBytes > 0 && r.RSS.IdleBytes <= TargetRSSBytes},
		{fmt.Sprintf("agent RSS, %d idle sessions", r.RSS.Sessions), fmtBytes(r.AgentRSSBytes),
			"≤ " + fmtBytes(TargetAgentRSSBytes), r.AgentRSSBytes > 0 && r.AgentRSSBytes <= TargetAgentRSSBytes},
		{fmt.Sprintf("sidecar RSS after %s of output and a %s diff", fmtBytes(r.Stream.Bytes), fmtBytes(r.Diff.Bytes)), fmtBytes(r.RSS.AfterLoadBytes),
			"≤ " + fmtBytes(TargetRSSAfterLoadBytes), r.RSS.AfterLoadBytes > 0 && r.RSS.AfterLoadBytes <= TargetRSSAfterLoadBytes},
		{fmt.Sprintf("git status, workspace ÷ repository (%d files)", r.GitStatus.Files), fmt.Sprintf("%.2f×", r.GitStatus.Ratio),
			fmt.Sprintf("≤ %g×", TargetGitStatusRatio), r.GitStatus.Ratio > 0 && r.GitStatus.Ratio <= TargetGitStatusRatio},
		{fmt.Sprintf("sidecar RSS peak, %d execs at once writing 2 × %s each", r.Memory.Execs, fmtBytes(r.Memory.OutputBytes)), fmtBytes(r.Memory.OutputsPeakBytes),
			"≤ " + fmtBytes(TargetMemoryPeakBytes), r.Memory.OutputsPeakBytes > 0 && r.Memory.OutputsPeakBytes <= TargetMemoryPeakBytes},
		{fmt.Sprintf("sidecar RSS peak, %d forwarded connections never read", r.Memory.Connections), fmtBytes(r.Memory.ForwardsPeakBytes),
			"≤ " + fmtBytes(TargetMemoryPeakBytes), r.Memory.ForwardsPeakBytes > 0 && r.Memory.ForwardsPeakBytes <= TargetMemoryPeakBytes},
	}
	if r.Egress.Skipped == "" {
		r.Checks = append(r.Checks, Check{fmt.Sprintf("HTTPS %s through the egress proxy ÷ direct", fmtBytes(r.Egress.ProxyBytes.Bytes)),
			fmt.Sprintf("%.2f×", r.Egress.ThroughputRatio), fmt.Sprintf("≥ %g×", TargetEgressThroughputRatio),
			r.Egress.ThroughputRatio >= TargetEgressThroughputRatio})
	}
}

// WriteText prints the report as a table: each judged figure with its
// target and PASS or MISS, and the other figures beside them.
func (r Report) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "patina bench: sidecar %s, image %s, %d CPUs, %s, took %s\n\n",
		r.Version, r.Image, r.CPUs, r.StartedAt.Local().Format(time.DateTime),
		time.Duration(r.DurationMS*float64(time.Millisecond)).Round(100*time.Millisecond))
	var rows [][]string
	row := func(cells ...string) { rows = append(rows, cells) }
	judged := func(i int) {
		if i >= len(r.Checks) {
			return
		}
		row(r.Checks[i].cells()...)
	}
	row("FIGURE", "VALUE", "TARGET", "RESULT")
	judged(0)
	row(fmt.Sprintf("HTTP exec p90 / p99 (%d samples, %d conn)", r.HTTPExec.Samples, r.HTTPConnections),
		fmtMS(r.HTTPExec.P90MS)+" / "+fmtMS(r.HTTPExec.P99MS), "", "")
	row(fmt.Sprintf("Docker exec p50 / p90 (%d samples)", r.DockerExec.Samples),
		fmtMS(r.DockerExec.P50MS)+" / "+fmtMS(r.DockerExec.P90MS), "", "")
	judged(1)
	judged(2)
	row(fmt.Sprintf("create → first exec max (%d samples)", r.CreateToFirstExec.Samples),
		fmtMS(r.CreateToFirstExec.MaxMS), "", "")
	judged(3)
	judged(4)
	c := r.Concurrent
	row("concurrent exec p50 / p99", fmtMS(c.Latency.P50MS)+" / "+fmtMS(c.Latency.P99MS), "", "")
	judged(5)
	row("sidecar RSS at start / sessions before load",
		fmtBytes(r.RSS.StartBytes)+" / "+fmtBytes(r.RSS.SessionsBytes), "", "")
	judged(6)
	if r.AgentAnonBytes > 0 {
		row("agent RSS: its own / its binary's pages (shared)", fmtBytes(r.AgentAnonBytes)+" / "+fmtBytes(r.AgentFileBytes), "", "")
	}
	if iw := r.IdleWorkspace; iw.MemoryBytes > 0 {
		row(fmt.Sprintf("one idle workspace on %s (init, agent, one shell): docker stats / less all page cache / how many fit in the engine's memory", iw.Agent),
			fmt.Sprintf("%s / %s / %d in %s (target ≤ %s)", fmtBytes(iw.MemoryBytes), fmtBytes(iw.NoCacheBytes), iw.Fit, fmtBytes(iw.EngineMemoryBytes), fmtBytes(TargetIdleWorkspaceBytes)), "", "")
	}
	row("output streamed / diff taken", fmt.Sprintf("%.0f MB/s / %s", r.Stream.MBPerSecond, fmtMS(r.Diff.MS)), "", "")
	judged(7)
	row(fmt.Sprintf("exec p50 / p90 via the exec relay (%d samples)", r.RelayExec.Samples),
		fmtMS(r.RelayExec.P50MS)+" / "+fmtMS(r.RelayExec.P90MS), "", "")
	judged(8)
	row("git status in the workspace / the repository", fmtMS(r.GitStatus.WorkspaceMS)+" / "+fmtMS(r.GitStatus.RepoMS), "", "")
	p := r.Ports
	row(fmt.Sprintf("HTTP GET p50 forwarded / direct (%d samples)", p.Forwarded.Samples),
		fmtMS(p.Forwarded.P50MS)+" / "+fmtMS(p.Direct.P50MS)+fmt.Sprintf(" (+%s)", fmtMS(p.AddedP50MS)), "", "")
	forkDisk := "not read (no disk pool)"
	if r.Fork.DiskMB >= 0 {
		forkDisk = fmt.Sprintf("%.1f MB", r.Fork.DiskMB)
	}
	row(fmt.Sprintf("fork of a workspace with %s installed, to its first exec / host disk it took", fmtBytes(r.Fork.Bytes)),
		fmt.Sprintf("%s / %s (targets ≤ %d ms, ≤ %d MB)", fmtMS(r.Fork.MS), forkDisk, TargetForkMS, TargetForkDiskMB), "", "")
	row(fmt.Sprintf("resume after idle stop → first exec p50 / max: paused (%d samples); stopped (%d)", r.Resume.Samples, r.Resume.Stopped.Samples),
		fmt.Sprintf("%s / %s; %s / %s (shell state kept: %s; target p50 ≤ %d ms)", fmtMS(r.Resume.P50MS), fmtMS(r.Resume.MaxMS),
			fmtMS(r.Resume.Stopped.P50MS), fmtMS(r.Resume.Stopped.MaxMS), yesNo(r.Resume.StateKept), TargetResumeP50MS), "", "")
	rc := r.RepoCreate
	row(fmt.Sprintf("create of a %d-file repository workspace (%s packed) → first exec: first of its base / second / a later base", rc.Files, fmtBytes(rc.PackBytes)),
		fmtMS(rc.FirstMS)+" / "+fmtMS(rc.SecondMS)+" / "+fmtMS(rc.LaterMS), "", "")
	wp := r.WarmPool
	row("create → first exec p50 / p99: with the warm pool / without / docker run --rm IMAGE true",
		fmt.Sprintf("%s / %s; %s / %s; %s / %s (%.2f× and %.2f× docker run; targets ≤ 100 / 300 ms, ≤ 0.2×)",
			fmtMS(wp.Pool.P50MS), fmtMS(wp.Pool.P99MS), fmtMS(wp.NoPool.P50MS), fmtMS(wp.NoPool.P99MS),
			fmtMS(wp.DockerRun.P50MS), fmtMS(wp.DockerRun.P99MS), wp.PoolRatio, wp.NoPoolRatio), "", "")
	dc := r.Devcontainer
	row("devcontainer repository → first exec: first (builds the template) / second, from the template's warm pool / second, without a pool",
		fmtMS(dc.FirstMS)+" / "+fmtMS(dc.PooledMS)+" / "+fmtMS(dc.SecondMS)+fmt.Sprintf(" (%.3f× and %.3f×; target ≤ 0.1× with the pool)", dc.Ratio, dc.NoPoolRatio), "", "")
	row(fmt.Sprintf("HTTP %s forwarded / direct", fmtBytes(p.ForwardedBytes.Bytes)),
		fmt.Sprintf("%.0f / %.0f MB/s (%.2f×)", p.ForwardedBytes.MBPerSecond, p.DirectBytes.MBPerSecond, p.ThroughputRatio), "", "")
	judged(9)
	judged(10)
	row("sidecar RSS before those loads / the answers' wall time", fmtBytes(r.Memory.BaseBytes)+" / "+fmtMS(r.Memory.OutputsMS), "", "")
	if e := r.Egress; e.Skipped == "" {
		judged(11)
		row("HTTPS GET p50 through the egress proxy / direct", fmt.Sprintf("%s / %s (+%s)", fmtMS(e.ProxyGet.P50MS), fmtMS(e.DirectGet.P50MS), fmtMS(e.AddedP50MS)), "", "")
		row(fmt.Sprintf("HTTPS %s through the egress proxy / direct (median of %d alternating rounds)", fmtBytes(e.ProxyBytes.Bytes), e.Rounds),
			fmt.Sprintf("%.0f / %.0f MB/s", e.ProxyBytes.MBPerSecond, e.DirectBytes.MBPerSecond), "", "")
	} else {
		row("egress proxy", "not measured: "+e.Skipped, "", "")
	}
	if err := writeTable(w, rows); err != nil {
		return err
	}
	if c.FirstError != "" {
		fmt.Fprintf(w, "\nfirst concurrent error: %s\n", c.FirstError)
	}
	return writeVerdict(w, r.Pass())
}

// writeTable prints rows as aligned columns.
func writeTable(w io.Writer, rows [][]string) error {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 3, ' ', 0)
	for _, cells := range rows {
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, l := range strings.SplitAfter(buf.String(), "\n") {
		if l != "" {
			if _, err := fmt.Fprintln(w, strings.TrimRight(l, " \n")); err != nil {
				return err
			}
		}
	}
	return nil
}

// fmtMS formats milliseconds readably: "0.212 ms", "38.9 ms", "1.24 s".
func fmtMS(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.2f s", v/1000)
	case v >= 10:
		return fmt.Sprintf("%.1f ms", v)
	default:
		return fmt.Sprintf("%.3f ms", v)
	}
}

// fmtBytes formats a size in MB (10^6 bytes), as the targets are stated.
func fmtBytes(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }
