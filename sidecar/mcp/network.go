package mcpserver

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/patina-dev/patina/sidecar/client"
)

// addNetworkTool registers network_restrict: an agent may take network
// away from a workspace, never give it more. The sidecar checks that
// (PUT .../network?narrow=1), not this server.
func (s *server) addNetworkTool(ms *mcp.Server) {
	addTool(s, ms, &mcp.Tool{
		Name:  "network_restrict",
		Title: "Restrict what a workspace may reach on the network",
		Description: "Narrow a workspace's network policy: keep only the destinations listed in allow (names such as pypi.org, " +
			"wildcards such as *.golang.org, addresses or CIDR prefixes, each with an optional :port), or none=true for no network. " +
			"It can only take away: anything the current policy does not already allow is refused. Connections the new policy " +
			"does not allow are cut at once. Only the user can widen a policy (patina ws network).",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, s.networkRestrict)
}

func (s *server) networkRestrict(ctx context.Context, in NetworkRestrictIn) (string, NetworkOut, error) {
	if err := required("workspace", in.Workspace, "the workspace's name or id"); err != nil {
		return "", NetworkOut{}, err
	}
	p := client.NetworkPolicy{Mode: client.NetworkAllow, Allow: in.Allow}
	switch {
	case in.None && len(in.Allow) > 0:
		return "", NetworkOut{}, argErrorf("give allow or none=true, not both")
	case in.None:
		p = client.NetworkPolicy{Mode: client.NetworkNone}
	}
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	var w client.Workspace
	err := s.call(ctx, func(c *client.Client) (err error) {
		w, err = c.SetNetwork(ctx, in.Workspace, p, true)
		return err
	})
	if err != nil {
		return "", NetworkOut{}, err
	}
	return fmt.Sprintf("Workspace %s's network is now: %s.", in.Workspace, w.Network.String()), NetworkOut{Mode: w.Network.Mode, Allow: w.Network.Allow}, nil
}
