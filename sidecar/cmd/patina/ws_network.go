package main

import (
	"context"
	"fmt"
	"io"

	"github.com/patina-dev/patina/sidecar/client"
	"github.com/spf13/cobra"
)

func newWsNetworkCmd(a *app) *cobra.Command {
	var (
		none, open, narrow, asJSON bool
		allow                      []string
	)
	cmd := &cobra.Command{
		Use:   "network WS",
		Short: "Show or change what a workspace may reach on the network",
		Long: `Show a workspace's network policy, or change it (running or stopped):

  --none          no network at all
  --open          the internet, never the host, private, link-local (cloud
                  metadata) or other reserved addresses, never another workspace
  --allow DEST    only these destinations (repeatable): DNS names ("pypi.org"),
                  wildcards ("*.golang.org": every name below golang.org),
                  addresses and CIDR prefixes ("10.0.0.5", "203.0.113.0/24"),
                  each with an optional port ("10.0.0.5:5432", "[2001:db8::1]:443");
                  an address or prefix may be private: that is how a LAN
                  database is let in

A change takes effect at once: connections the new policy does not allow are
cut. Everything refused is refused at once (an HTTP client gets a 403 naming the
policy, anything else a reset) and recorded in the workspace's log (patina ws
log). --narrow makes the sidecar refuse a change that would allow anything the
current policy does not. README "Network" says what each mode guarantees.`,
		Example: `  patina ws network fix-tests
  patina ws network fix-tests --allow pypi.org --allow '*.pythonhosted.org'
  patina ws network fix-tests --allow 10.0.0.5:5432 --allow github.com:443
  patina ws network fix-tests --none`,
		Args: wsArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			n := 0
			for _, b := range []bool{none, open, len(allow) > 0} {
				if b {
					n++
				}
			}
			if n > 1 {
				return usagef("give one of --none, --open and --allow")
			}
			if n == 0 {
				if narrow {
					return usagef("--narrow needs a change (--none or --allow)")
				}
				return query(a, cmd, asJSON, func(ctx context.Context, c *client.Client) (client.NetworkPolicy, error) {
					ws, err := c.GetWorkspace(ctx, args[0])
					return ws.Network, err
				}, printPolicy)
			}
			p := client.NetworkPolicy{Mode: client.NetworkAllow, Allow: allow}
			switch {
			case none:
				p = client.NetworkPolicy{Mode: client.NetworkNone}
			case open:
				p = client.NetworkPolicy{Mode: client.NetworkOpen}
			}
			return a.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				ws, err := c.SetNetwork(ctx, args[0], p, narrow)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(a.stdout, ws.Network)
				}
				return printPolicy(a.stdout, ws.Network)
			})
		},
	}
	f := cmd.Flags()
	f.BoolVar(&none, "none", false, "no network")
	f.BoolVar(&open, "open", false, "the internet, nothing private, not the host, not other workspaces")
	f.StringArrayVar(&allow, "allow", nil, "allow only this `DEST` (repeatable)")
	f.BoolVar(&narrow, "narrow", false, "refuse the change if it would allow anything the current policy does not")
	f.BoolVar(&asJSON, "json", false, "print the policy as JSON")
	return cmd
}

// printPolicy prints a policy: its mode, then one allowed destination a
// line.
func printPolicy(w io.Writer, p client.NetworkPolicy) error {
	if _, err := fmt.Fprintln(w, p.Mode); err != nil {
		return err
	}
	for _, a := range p.Allow {
		if _, err := fmt.Fprintln(w, "  "+a); err != nil {
			return err
		}
	}
	return nil
}
