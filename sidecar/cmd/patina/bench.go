//go:build !windows

package main

import (
	"fmt"
	"io"

	"github.com/docker/docker/client"

	"github.com/patina-dev/patina/sidecar/bench"
	"github.com/patina-dev/patina/sidecar/image"
	"github.com/spf13/cobra"
)

type benchOptions struct {
	json       bool
	failOnMiss bool
	opts       bench.Options
	// streamMB, diffMB, repoHistoryMB and memOutputMB are --stream-mb,
	// --diff-mb, --repo-history-mb and --mem-output-mb (MB, 10^6 bytes).
	streamMB, diffMB, repoHistoryMB, memOutputMB int64
	// engine is --engine; nodeBinary and unencrypted its swarm options.
	engine      string
	nodeBinary  string
	nodeSocket  string
	unencrypted bool
	// runscHost is --runsc-host: compare runc with runsc (gVisor) there.
	runscHost string
	// density is --density: how many idle workspaces to hold at once;
	// burst is --burst: how many creates to send at once.
	density, burst int
	// agentBinary is --agent-binary (--density and --burst only).
	agentBinary string
}

// report is a bench report: Report or SwarmReport.
type report interface {
	WriteText(w io.Writer) error
	Pass() bool
}

func newBenchCmd(a *app) *cobra.Command {
	var o benchOptions
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure a sidecar on this machine against patina's targets",
		Long: `Measure a sidecar on this machine, in one run against one workspace container,
and print each figure with its target and PASS or MISS:

  exec of ` + "`true`" + ` through the HTTP API (sequential, one keep-alive connection):
      p50 ≤ 0.5 ms, and ≥ 75× faster than one Docker API exec
      (create + attach + inspect) in the same container
  workspace create → first exec: p50 ≤ 1 s
  --sessions sessions × --execs execs concurrently: ≥ 2,000 exec/s, 0 errors
  the sidecar's resident memory with those sessions idle: ≤ 50 MB
  the workspace agent's resident memory then: ≤ 15 MB
  the sidecar's memory after streaming --stream-mb of a command's output and
      taking the diff of a --diff-mb file: ≤ 100 MB
  git status in a workspace of --git-files files ÷ in its repository: ≤ 1.5×
  the sidecar's peak memory while --mem-execs commands at once each write
      --mem-output-mb to stdout and to stderr, and while --mem-connections
      connections through forwarded ports are never read: ≤ 100 MB each
and, unjudged, exec of true through the exec relay (a second sidecar with
--agent-transport exec: the path of a remote engine or a sidecar in a
container), and the create of a --git-files-file repository workspace with
--repo-history-mb of history (1000 for a 1 GB repository, as hack/bigrepo
makes) to its first exec: the first of its base, a second, one of a later
base.

With --engine swarm (on a manager of a swarm with another ready node), it
measures instead, in a sidecar started with --engine swarm:
  exec of ` + "`true`" + ` p50 in a workspace on another node ÷ in one on this node:
      ≤ 1.5×
  and, unjudged, create → first exec on each node.

With --runsc-host (a Docker engine that has gVisor's runsc registered; see
README "Runtimes"), it measures instead, unjudged, what each runtime costs: a
sidecar with --runtime runc on this engine and one with --runtime runsc on
that one, each: exec of ` + "`true`" + ` p50 / p90, create → first exec, and the
idle workspace container's memory, and runsc's ratio to runc for each.
--samples and --create-samples apply (defaults there 300 and 3); the image
and the binary (--node-binary) must be on every node.

With --density N, it measures instead how many workspaces this host holds:
it creates N workspaces (4 at a time, each to its first exec), lets them
idle, and prints an idle workspace's memory as docker stats shows it (its
init, agent and one idle shell: target ≤ 6 MB) and less all its page cache,
what each costs this host (MemAvailable before and after), the engine's
storage driver (on fuse-overlayfs each container caches the image's files on
its own, about 3.5 MB), the sidecar's RSS, and the time of one exec of
` + "`true`" + ` in each (target: every one within 1 s). The density run of
README ("Density") is --density 1000; it needs about 15 GB of free memory
and the engine's default limits (a thousand containers, a thousand veths
unless the workspaces are network none).

With --burst N, it measures instead N creates sent at once, each to its
first exec, to a sidecar started with --warm N once its pool is full
(target: p95 ≤ 1 s), and then N creates at once that the pool cannot serve
(each with a memory limit other than the pool's), while the pool refills.

patina bench starts a sidecar of its own (this program's "serve" on a free
loopback port, with a temporary state directory and token) so that it can
read its memory use, and removes it, its workspaces and the directory at the
end. It needs a Docker engine and the workspace image (patina image build);
it does not use a running sidecar, nor the global --addr, --token and
--state-dir. Progress goes to stderr.`,
		Example: `  patina bench
  patina bench --json > bench.json
  patina bench --samples 200 --sessions 10 --execs 20 --stream-mb 100 --diff-mb 10 --git-files 1000   # a quick run
  patina bench --density 1000   # a thousand idle workspaces on this host
  patina bench --density 100 --agent-binary ./patina-agent   # the same, the workspaces running patina-agent
  patina bench --burst 100      # a hundred creates at once, with a warm pool of 100`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bin, err := a.executable()
			if err != nil {
				return fmt.Errorf("find the patina executable: %w", err)
			}
			if o.agentBinary != "" && !cmd.Flags().Changed("density") && !cmd.Flags().Changed("burst") {
				return usagef("--agent-binary is for --density and --burst: the other runs' port checks need this whole binary in their workspaces")
			}
			if o.runscHost != "" {
				return o.runRuntimes(cmd, a, bin)
			}
			if cmd.Flags().Changed("density") {
				return o.runDensity(cmd, a, bin)
			}
			if cmd.Flags().Changed("burst") {
				return o.runBurst(cmd, a, bin)
			}
			switch o.engine {
			case "docker":
			case "swarm":
				return o.runSwarm(cmd, a, bin)
			default:
				return usagef("--engine must be docker or swarm, got %q", o.engine)
			}
			if o.opts.Samples <= 0 || o.opts.Sessions <= 0 || o.opts.Execs <= 0 ||
				o.opts.DockerSamples <= 0 || o.opts.CreateSamples <= 0 || o.streamMB <= 0 || o.diffMB <= 0 ||
				o.opts.GitFiles <= 0 || o.opts.RelaySamples <= 0 || o.repoHistoryMB <= 0 ||
				o.opts.MemExecs <= 0 || o.memOutputMB <= 0 || o.opts.MemConnections <= 0 {
				return usagef("--samples, --docker-samples, --create-samples, --sessions, --execs, --stream-mb, --diff-mb, --git-files, --repo-history-mb, --relay-samples, --mem-execs, --mem-output-mb and --mem-connections must be positive")
			}
			if o.opts.MemConnections > 1000 {
				return usagef("--mem-connections must be at most 1000 (a workspace takes 1024 connections through its ports at once)")
			}
			o.opts.MemOutputBytes = o.memOutputMB * 1_000_000
			o.opts.RepoHistoryBytes = o.repoHistoryMB * 1_000_000
			o.opts.StreamBytes = o.streamMB * 1_000_000
			o.opts.DiffBytes = o.diffMB * 1_000_000
			opts := o.opts
			opts.Binary = bin
			opts.Progress = a.stderr
			rep, err := bench.Run(cmd.Context(), opts)
			if err != nil {
				return err
			}
			return o.print(a, rep)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.json, "json", false, "print the report as JSON")
	f.BoolVar(&o.failOnMiss, "fail-on-miss", false, "exit 1 when a target is missed")
	f.IntVar(&o.opts.Samples, "samples", 1000, "sequential HTTP execs measured (after 100 warm-up)")
	f.IntVar(&o.opts.DockerSamples, "docker-samples", 50, "Docker API execs measured")
	f.IntVar(&o.opts.CreateSamples, "create-samples", 5, "workspaces created to time create → first exec")
	f.IntVar(&o.opts.Sessions, "sessions", 100, "sessions in the concurrent run")
	f.IntVar(&o.opts.Execs, "execs", 100, "execs per session in the concurrent run")
	f.Int64Var(&o.streamMB, "stream-mb", 1000, "MB of a command's output streamed before reading the sidecar's memory")
	f.Int64Var(&o.diffMB, "diff-mb", 300, "MB of the file whose diff is taken before reading the sidecar's memory")
	f.IntVar(&o.opts.GitFiles, "git-files", 10_000, "files of the repository whose git status is timed")
	f.Int64Var(&o.repoHistoryMB, "repo-history-mb", 100, "MB of history in the --git-files-file repository whose workspaces' creation is timed (1000: a 1 GB repository)")
	f.IntVar(&o.opts.RelaySamples, "relay-samples", 200, "execs timed through the exec relay")
	f.IntVar(&o.opts.MemExecs, "mem-execs", 40, "commands at once whose output loads the sidecar's memory")
	f.Int64Var(&o.memOutputMB, "mem-output-mb", 4, "MB each of those commands writes to stdout, and as many to stderr")
	f.IntVar(&o.opts.MemConnections, "mem-connections", 1000, "connections through forwarded ports that are never read")
	f.StringVar(&o.opts.Image, "image", image.DefaultTag, "the workspaces' image")
	f.StringVar(&o.engine, "engine", "docker", "docker (this engine) or swarm (a workspace on this node against one on another node)")
	f.StringVar(&o.nodeBinary, "node-binary", "", "--engine swarm: the patina binary's path on every node (default: serve's default)")
	f.StringVar(&o.runscHost, "runsc-host", "", "compare the runtimes instead: a Docker engine (DOCKER_HOST form, unix:///run/gvisor-docker.sock) that has runsc registered; --samples and --create-samples apply (defaults there 300 and 3)")
	f.StringVar(&o.agentBinary, "agent-binary", "", "with --density or --burst: the agent the measured sidecar ships to its workspaces (serve --agent-binary; default serve's: patina-agent beside this executable if there is one that fits, else this executable). The main run ships this whole binary (its port checks need it) except to its idle workspace, which gets serve's default")
	f.IntVar(&o.density, "density", 0, "measure instead how many idle workspaces this host holds: create this many and time an exec in each (see above)")
	f.IntVar(&o.burst, "burst", 0, "measure instead this many creates at once, with a warm pool as large and without (see above)")
	f.StringVar(&o.nodeSocket, "swarm-node-socket", "", "--engine swarm: where every node's Docker socket is (default: serve's default), to remove the benchmark's volumes there")
	f.BoolVar(&o.unencrypted, "swarm-unencrypted", false, "--engine swarm: leave the workspaces' overlay networks unencrypted (as serve's flag)")
	return cmd
}

// print writes the report and says whether targets were missed.
func (o *benchOptions) print(a *app, rep report) error {
	var err error
	if o.json {
		err = writeJSON(a.stdout, rep)
	} else {
		err = rep.WriteText(a.stdout)
	}
	if err != nil {
		return err
	}
	if o.failOnMiss && !rep.Pass() {
		return &exitError{code: exitFailure}
	}
	return nil
}

// runSwarm is bench --engine swarm.
func (o *benchOptions) runSwarm(cmd *cobra.Command, a *app, bin string) error {
	if o.opts.Samples <= 0 || o.opts.CreateSamples <= 0 {
		return usagef("--samples and --create-samples must be positive")
	}
	samples, creates := o.opts.Samples, o.opts.CreateSamples
	if !cmd.Flags().Changed("samples") {
		samples = 0 // RunSwarm's default
	}
	if !cmd.Flags().Changed("create-samples") {
		creates = 0
	}
	api, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return fmt.Errorf("docker client: %w", err)
	}
	defer api.Close()
	rep, err := bench.RunSwarm(cmd.Context(), api, bench.SwarmOptions{
		Binary: bin, NodeBinary: o.nodeBinary, NodeSocket: o.nodeSocket, Image: o.opts.Image, Samples: samples, CreateSamples: creates,
		Unencrypted: o.unencrypted, Progress: a.stderr,
	})
	if err != nil {
		return err
	}
	return o.print(a, rep)
}
