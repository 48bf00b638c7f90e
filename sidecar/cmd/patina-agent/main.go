// Command patina-agent is what runs inside a workspace's container, on its
// own: the container's init (agent pause), the agent that owns its
// sessions, files and repository (agent serve), the relay a remote sidecar
// reaches it through (agent relay), a fork's copier (agent copy) and a
// swarm node's binary check (agent check-binary). It links nothing of the
// sidecar or the CLI: no Docker client, MCP SDK, cobra or OpenTelemetry.
//
// It answers the same command lines as `patina agent ...`, so
//
//	patina serve --agent-binary /path/to/patina-agent
//
// ships it to the workspaces in place of the whole patina binary (the
// default). Build it static for the engine's architecture:
//
//	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -o patina-agent ./sidecar/cmd/patina-agent
//
// What it does not have: `agent test-server` and `agent test-client`
// (patina bench's port checks) and `agent remove-volumes` (a swarm
// cleanup, which runs from the sidecar's own binary).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/patina-dev/patina/sidecar/agent/inside"
	"github.com/patina-dev/patina/sidecar/agent/wire"
)

// version is stamped at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `usage: patina-agent agent COMMAND [FLAGS]

The program inside a workspace's container; the sidecar starts it.
Commands:
  serve         serve the workspace's sessions, files and repository
  pause         the container's init: wait and reap (-- a command to keep running)
  relay         relay standard input and output to the agent's socket
  copy FROM TO  copy a tree without following links (a fork's volumes)
  check-binary --sha256 HEX PATH   exit 0 if PATH has that sha256, 3 if not, 4 if absent
  version       print "patina-agent VERSION protocol N" (N: the protocol it speaks
                to a sidecar, which checks it before it ships this binary)
`

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) < 2 || args[0] != "agent" {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	name, args := args[1], args[2:]
	fs := flag.NewFlagSet("patina-agent agent "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var err error
	switch name {
	case "serve":
		cfg := inside.RunConfig{Version: version}
		cfg.Flags(fs)
		if code, ok := parse(fs, args, 0); !ok {
			return code
		}
		if cfg.WorkspaceID == "" {
			return usageError(stderr, "--workspace-id is required")
		}
		inside.TuneProcess()
		err = inside.Run(ctx, cfg)
	case "pause":
		once := fs.Bool("once", false, "start the command after -- once, never again")
		keep := []string(nil)
		if i := slices.Index(args, "--"); i >= 0 {
			args, keep = args[:i], args[i+1:]
		}
		if code, ok := parse(fs, args, 0); !ok {
			return code
		}
		if *once && len(keep) == 0 {
			return usageError(stderr, "--once needs a patina command after --")
		}
		inside.TunePause()
		err = inside.Pause(ctx, inside.PauseConfig{Keep: keep, Once: *once})
	case "relay":
		socket := fs.String("socket", wire.SocketName, "the agent's abstract socket")
		if code, ok := parse(fs, args, 0); !ok {
			return code
		}
		err = inside.Relay(*socket, stdin, stdout)
	case "copy":
		if code, ok := parse(fs, args, 2); !ok {
			return code
		}
		err = inside.CopyTree(fs.Arg(0), fs.Arg(1))
	case "check-binary":
		sum := fs.String("sha256", "", "the sha256 the file must have (64 hex digits)")
		if code, ok := parse(fs, args, 1); !ok {
			return code
		}
		if *sum == "" {
			return usageError(stderr, "--sha256 is required")
		}
		err = inside.CheckBinary(fs.Arg(0), *sum)
		switch {
		case errors.Is(err, inside.ErrBinaryDiffers):
			fmt.Fprintln(stderr, "patina-agent: "+err.Error())
			return inside.ExitBinaryDiffers
		case errors.Is(err, inside.ErrBinaryMissing):
			fmt.Fprintln(stderr, "patina-agent: "+err.Error())
			return inside.ExitBinaryMissing
		}
	case "version":
		if code, ok := parse(fs, args, 0); !ok {
			return code
		}
		fmt.Fprintf(stdout, "patina-agent %s protocol %d\n", version, wire.ProtocolVersion)
	default:
		return usageError(stderr, fmt.Sprintf("unknown command %q", name))
	}
	if err != nil {
		fmt.Fprintln(stderr, "patina-agent: "+err.Error())
		return exitFailure
	}
	return exitOK
}

// parse parses args with fs and checks that exactly n arguments remain;
// ok false: the exit code to return (0 after -h).
func parse(fs *flag.FlagSet, args []string, n int) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	if fs.NArg() != n {
		fmt.Fprintf(fs.Output(), "%s takes %d arguments, got %d\n", fs.Name(), n, fs.NArg())
		return exitUsage, false
	}
	return 0, true
}

func usageError(stderr io.Writer, msg string) int {
	fmt.Fprintf(stderr, "patina-agent: %s\n\n%s", msg, usage)
	return exitUsage
}
