//go:build !windows

package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"

	"github.com/spf13/cobra"

	"github.com/patina-dev/patina/sidecar/agent/inside"
	"github.com/patina-dev/patina/sidecar/agent/wire"
	"github.com/patina-dev/patina/sidecar/bench"
)

func newAgentCmd(a *app) *cobra.Command {
	cmd := groupCmd(&cobra.Command{
		Use:   "agent",
		Short: "Run inside a workspace's container (started by the sidecar)",
		Long: `The agent runs inside each workspace's container, started by the sidecar from the
read-only copy of this binary at /.patina/bin/patina. It owns the workspace's
sessions, files and git repository and serves them to the sidecar on an abstract
unix socket in the container's network namespace. You do not run these commands
yourself.`,
	})
	cmd.AddCommand(newAgentServeCmd(a), newAgentRelayCmd(a), newAgentPauseCmd(a), newAgentTestServerCmd(a), newAgentTestClientCmd(a), newAgentCopyCmd(a), newAgentCheckBinaryCmd(a), newAgentRemoveVolumesCmd(a))
	return cmd
}

func newAgentTestServerCmd(a *app) *cobra.Command {
	var (
		addr   string
		useTLS bool
	)
	cmd := &cobra.Command{
		Use:   "test-server",
		Short: "Serve the HTTP test server of patina's port-forwarding tests and bench",
		Long: `Serve a small HTTP server (/hello, /bytes?n=N, /stream?n=K&ms=M, POST /echo and
/upgrade, which switches protocols and echoes raw bytes) that patina's tests and
"patina bench" run inside a workspace to measure and check port forwarding.`,
		Example: `  /.patina/bin/patina agent test-server --listen 0.0.0.0:3000 &`,
		Hidden:  true,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return err
			}
			if useTLS {
				cfg, err := bench.SelfSignedTLS()
				if err != nil {
					return err
				}
				ln = tls.NewListener(ln, cfg)
			}
			fmt.Fprintf(a.stderr, "test server listening on %s\n", ln.Addr())
			return bench.ServeTestHTTP(cmd.Context(), ln)
		},
	}
	cmd.Flags().StringVar(&addr, "listen", "127.0.0.1:3000", "the address to listen on")
	cmd.Flags().BoolVar(&useTLS, "tls", false, "serve HTTPS (a certificate made at start)")
	return cmd
}

func newAgentTestClientCmd(a *app) *cobra.Command {
	var (
		url     string
		samples int
		n       int64
	)
	cmd := &cobra.Command{
		Use:   "test-client",
		Short: "Measure HTTPS GETs to the test server (patina bench runs it inside a workspace)",
		Long: `Time HTTPS GETs of /hello on one connection to the test server at --url, then one
GET of --bytes bytes, and print the figures as JSON: "patina bench" runs it in a
workspace (through the egress proxy) and the same code on the host (directly).`,
		Example: `  /.patina/bin/patina agent test-client --url https://198.51.100.2:8443 --samples 200 --bytes 1000000`,
		Hidden:  true,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := bench.RunTestClient(cmd.Context(), url, samples, n)
			if err != nil {
				return err
			}
			return writeJSON(a.stdout, res)
		},
	}
	cmd.Flags().StringVar(&url, "url", "", "the test server, https://HOST:PORT")
	cmd.Flags().IntVar(&samples, "samples", 500, "how many GETs of /hello to time")
	cmd.Flags().Int64Var(&n, "bytes", 512_000_000, "the size of the download")
	return cmd
}

func newAgentServeCmd(a *app) *cobra.Command {
	var cfg inside.RunConfig
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the workspace's sessions, files and repository to the sidecar",
		Long: `Serve the workspace's sessions, files and repository on an abstract unix socket
(default @patina-agent); a sidecar on the same host moves its connection to two
pipes it hands over. The token every connection must present is read from
the environment variable ` + wire.TokenEnv + `. Sessions live under
<state-dir>/sessions and survive the agent: a new agent reattaches to the ones
whose shells still run. With --takeover, an agent that holds the socket but does
not answer is killed first. The log is <state-dir>/agent.log.`,
		Example: `  PATINA_AGENT_TOKEN=... /.patina/bin/patina agent serve --workspace-id 3f2a9c01b7e4d5a6 --takeover`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.WorkspaceID == "" {
				return usagef("--workspace-id is required")
			}
			cfg.Version = version
			inside.TuneProcess()
			return inside.Run(cmd.Context(), cfg)
		},
	}
	cfg.Flags(cmd.Flags())
	return cmd
}

func newAgentRelayCmd(a *app) *cobra.Command {
	var socket string
	cmd := &cobra.Command{
		Use:   "relay",
		Short: "Relay standard input and output to the agent's socket",
		Long: `Relay standard input and output to the agent's socket: how a sidecar that cannot
enter the container's network namespace (a remote engine, a sidecar in a
container) reaches the agent, through docker exec.`,
		Example: `  docker exec -i patina-3f2a9c01b7e4d5a6 /.patina/bin/patina agent relay`,
		Args:    noArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return inside.Relay(socket, a.stdin, a.stdout) },
	}
	cmd.Flags().StringVar(&socket, "socket", wire.SocketName, "the agent's abstract socket")
	return cmd
}

func newAgentPauseCmd(a *app) *cobra.Command {
	var once bool
	cmd := &cobra.Command{
		Use:   "pause [-- PATINA-ARGS...]",
		Short: "A workspace container's main process (PID 1): wait and reap",
		Long: `Wait until SIGTERM or SIGINT, reaping orphaned processes: a workspace container's
main process. As PID 1 it cannot be killed from inside the container (kill -9 -1
spares it), so the container outlives whatever a workspace does to its processes.

Arguments after -- are a patina command it keeps running: started at once and
again whenever it exits (0.5 s later, or 5 s if it lived under 10 s). A
workspace on a Swarm cluster runs its agent this way, since no docker exec
reaches a container on another node. With --once it starts the command once
only: a workspace on a Docker engine gets its first agent this way (the token
in PATINA_AGENT_TOKEN), and the sidecar starts any later one with docker exec.`,
		Example: `  /.patina/bin/patina agent pause
  /.patina/bin/patina agent pause -- agent serve --workspace-id 3f2a9c01b7e4d5a6 --tcp :7071 --token-file /run/secrets/patina-agent-token
  PATINA_AGENT_TOKEN=... /.patina/bin/patina agent pause --once -- agent serve --workspace-id 3f2a9c01b7e4d5a6`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && cmd.ArgsLenAtDash() != 0 {
				return usagef("%s takes no arguments except a patina command after --", cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if once && len(args) == 0 {
				return usagef("--once needs a patina command after --")
			}
			inside.TunePause()
			return inside.Pause(cmd.Context(), inside.PauseConfig{Keep: args, Once: once})
		},
	}
	cmd.Flags().BoolVar(&once, "once", false, "start the command after -- once, never again")
	return cmd
}

func newAgentCopyCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "copy FROM TO",
		Short: "Copy a tree without following links (forking a workspace)",
		Long: `Copy the tree under FROM into the existing directory TO, as cp -a would without
following any link: directories, regular files, symbolic links, FIFOs, with
modes, owners and times; devices and sockets are left out. The sidecar runs it
in a helper container to copy a workspace's volumes when it forks one.`,
		Example: `  /.patina/bin/patina agent copy /from /to`,
		Hidden:  true,
		Args:    cobra.ExactArgs(2),
		RunE:    func(cmd *cobra.Command, args []string) error { return inside.CopyTree(args[0], args[1]) },
	}
}

func newAgentCheckBinaryCmd(a *app) *cobra.Command {
	var sum string
	cmd := &cobra.Command{
		Use:   "check-binary --sha256 HEX PATH",
		Short: "Check that a file is a given patina binary (swarm nodes)",
		Long: `Exit 0 if PATH is a regular file whose sha256 is HEX, 3 if it is another file,
4 if there is no regular file there (a link is not followed). The sidecar runs
it on each swarm node, from an image of its own that holds its own binary, to
check the node's --node-binary before a workspace runs from it; the file
checked is read, never run.`,
		Example: `  /patina agent check-binary --sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 /node/patina`,
		Hidden:  true,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			err := inside.CheckBinary(args[0], sum)
			if err == nil {
				return nil
			}
			code := exitFailure
			switch {
			case errors.Is(err, inside.ErrBinaryDiffers):
				code = inside.ExitBinaryDiffers
			case errors.Is(err, inside.ErrBinaryMissing):
				code = inside.ExitBinaryMissing
			}
			fmt.Fprintln(a.stderr, "patina: "+err.Error())
			return &exitError{code: code}
		},
	}
	cmd.Flags().StringVar(&sum, "sha256", "", "the sha256 the file must have (64 hex digits)")
	_ = cmd.MarkFlagRequired("sha256")
	return cmd
}
