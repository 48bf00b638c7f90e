package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/patina-dev/patina/sidecar/client"
	"github.com/spf13/cobra"
)

func newWsPortCmd(a *app) *cobra.Command {
	var (
		hostPort int
		closeIt  bool
		asJSON   bool
	)
	cmd := &cobra.Command{
		Use:   "port WS [PORT]",
		Short: "Reach a server running inside a workspace from this machine",
		Long: `Forward a TCP port of a workspace to the sidecar's host: a server listening inside
the workspace on PORT (on 127.0.0.1, ::1 or all addresses) becomes reachable on
the host's loopback, at the address printed on stdout (127.0.0.1:N). HTTP,
WebSocket upgrades, streaming responses and any other TCP protocol pass through
unchanged.

Each connection is carried by the workspace's agent over the sidecar's own
channel to it, not through the container's network: it works for workspaces
created with network "none" and on a remote Docker engine. The forward lasts
until closed (--close) or the workspace is deleted; it survives a restart of the
sidecar, on the same host port when that port is still free. Connections made
while the workspace is stopped are closed.

Something must listen on PORT when you forward it: otherwise patina says so
(409 not_listening) instead of opening a port that leads nowhere. Without PORT,
lists the workspace's forwarded ports.`,
		Example: `  patina ws port fix-tests 3000
  curl "http://$(patina ws port fix-tests 3000)/"
  patina ws port fix-tests 5432 --host-port 15432
  patina ws port fix-tests
  patina ws port fix-tests 3000 --close`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 2 || len(args) == 1 {
				return wsArg(cmd, args[:1])
			}
			return usagef("%s needs a workspace and, to forward one, a port (got %d arguments)", cmd.CommandPath(), len(args))
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if closeIt || hostPort != 0 {
					return usagef("--close and --host-port need a PORT")
				}
				return query(a, cmd, asJSON, func(ctx context.Context, c *client.Client) ([]client.PortForward, error) {
					return c.Ports(ctx, args[0])
				}, writePorts)
			}
			port, err := strconv.Atoi(args[1])
			if err != nil || port < 1 || port > 65535 {
				return usagef("PORT must be a number between 1 and 65535, got %q", args[1])
			}
			return a.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				if closeIt {
					if err := c.ClosePort(ctx, args[0], port); err != nil {
						return err
					}
					_, err := fmt.Fprintf(a.stderr, "closed the forward of port %d of workspace %s\n", port, args[0])
					return err
				}
				p, err := c.ForwardPort(ctx, args[0], client.ForwardPortRequest{Port: port, HostPort: hostPort})
				var apiErr *client.APIError
				if errors.As(err, &apiErr) && apiErr.Code == client.CodeConflict {
					return &messageError{err: err, msg: fmt.Sprintf("%s\nClose it with: patina ws port %s %d --close", apiErr.Message, args[0], port)}
				}
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(a.stdout, p)
				}
				fmt.Fprintf(a.stderr, "port %d of workspace %s is at %s\n", p.Port, args[0], p.URL)
				_, err = fmt.Fprintln(a.stdout, p.Address)
				return err
			})
		},
	}
	f := cmd.Flags()
	f.IntVar(&hostPort, "host-port", 0, "the port to listen on on the host (default: any free port)")
	f.BoolVar(&closeIt, "close", false, "stop forwarding PORT (its open connections are closed)")
	f.BoolVar(&asJSON, "json", false, "print the forward (or the list) as JSON")
	return cmd
}

func writePorts(w io.Writer, ports []client.PortForward) error {
	rows := make([][]string, 0, len(ports))
	for _, p := range ports {
		rows = append(rows, []string{strconv.Itoa(p.Port), p.Address, p.URL, strconv.Itoa(p.Connections)})
	}
	return writeTable(w, []string{"PORT", "ADDRESS", "URL", "CONNECTIONS"}, rows)
}
