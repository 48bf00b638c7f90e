package mcpserver

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/patina-dev/patina/sidecar/client"
)

func (s *server) addPortTools(ms *mcp.Server) {
	addTool(s, ms, &mcp.Tool{
		Name:  "port_forward",
		Title: "Forward a workspace port to the user's machine",
		Description: "Make a server running inside a workspace (a dev server, an API, a database) reachable on the user's machine: " +
			"returns the local address (127.0.0.1:N) and URL to give the user. Start the server first (e.g. run with a command ending in &): " +
			"if nothing listens on the port, this fails and says so. HTTP, WebSockets and any TCP protocol pass through. " +
			"Forwarding the same port again returns the same address. With close=true, stops forwarding it.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(false), IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, s.portForward)
}

func (s *server) portForward(ctx context.Context, in PortForwardIn) (string, PortForwardOut, error) {
	if err := required("workspace", in.Workspace, "the workspace's name or id"); err != nil {
		return "", PortForwardOut{}, err
	}
	if in.Port < 1 || in.Port > 65535 {
		return "", PortForwardOut{}, argErrorf("port must be between 1 and 65535, got %d", in.Port)
	}
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	if in.Close {
		err := s.call(ctx, func(c *client.Client) error { return c.ClosePort(ctx, in.Workspace, in.Port) })
		if err != nil {
			return "", PortForwardOut{}, err
		}
		return fmt.Sprintf("Port %d of workspace %s is no longer forwarded.", in.Port, in.Workspace), PortForwardOut{Port: in.Port, Closed: true}, nil
	}
	var p client.PortForward
	err := s.call(ctx, func(c *client.Client) (err error) {
		p, err = c.ForwardPort(ctx, in.Workspace, client.ForwardPortRequest{Port: in.Port})
		return err
	})
	if err != nil {
		return "", PortForwardOut{}, err
	}
	text := fmt.Sprintf("Port %d of workspace %s is reachable on the user's machine at %s (%s).", p.Port, in.Workspace, p.Address, p.URL)
	return text, PortForwardOut{Port: p.Port, Address: p.Address, URL: p.URL}, nil
}

func (s *server) addForkTool(ms *mcp.Server) {
	addTool(s, ms, &mcp.Tool{
		Name:  "workspace_fork",
		Title: "Fork a workspace",
		Description: "Make a new workspace from an existing one, as it is now: its installed packages and other container changes, " +
			"its files (uncommitted changes included), its git history (a new branch at its current commit) and each session's shell state " +
			"(cwd, variables, functions, aliases). Running processes are not carried. Use it to try two approaches from the same point. " +
			"Returns the new workspace: pass its name as workspace to the other tools.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(false), OpenWorldHint: ptr(false)},
	}, s.workspaceFork)
}

func (s *server) workspaceFork(ctx context.Context, in WorkspaceForkIn) (string, WorkspaceOut, error) {
	if err := required("workspace", in.Workspace, "the name or id of the workspace to fork"); err != nil {
		return "", WorkspaceOut{}, err
	}
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	var w client.Workspace
	err := s.call(ctx, func(c *client.Client) (err error) {
		w, err = c.ForkWorkspace(ctx, in.Workspace, client.ForkWorkspaceRequest{Name: in.Name})
		return err
	})
	if err != nil {
		return "", WorkspaceOut{}, err
	}
	text := fmt.Sprintf("Forked workspace %s into %q (id %s)", in.Workspace, w.Name, w.ID)
	if w.Branch != "" {
		text += fmt.Sprintf(", branch %s", w.Branch)
	}
	text += ". Its sessions have their state back in new shells; processes that ran in the original were not carried."
	return text, workspaceOut(w), nil
}
