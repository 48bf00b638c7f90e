package sidecar

import (
	"github.com/patina-dev/patina/sidecar/client"
	"github.com/patina-dev/patina/sidecar/workspace"
)

// The API's workspace types and the domain's, translated here once each
// way: requests from the wire into the domain's, the domain's answers onto
// the wire. TestWorkspaceWire keeps the fields of each pair the same.

// createRequest is a create's body as the domain's request.
func createRequest(r client.CreateWorkspaceRequest) workspace.CreateRequest {
	out := workspace.CreateRequest{
		Name: r.Name, Repo: r.Repo, Base: r.Base, Image: r.Image, Template: r.Template, Dockerfile: r.Dockerfile,
		Env: r.Env, SecretEnv: r.SecretEnv, Secrets: r.Secrets,
		MemoryMB: r.MemoryMB, CPUs: r.CPUs, PidsLimit: r.PidsLimit, DiskMB: r.DiskMB,
		IdleStop: r.IdleStop, Placement: r.Placement,
	}
	if r.Network != nil {
		p := networkPolicy(*r.Network)
		out.Network = &p
	}
	return out
}

// snapshotRequest is a snapshot's body as the domain's request.
func snapshotRequest(r client.SnapshotWorkspaceRequest) workspace.SnapshotRequest {
	return workspace.SnapshotRequest{Name: r.Name}
}

// forkRequest is a fork's body as the domain's request.
func forkRequest(r client.ForkWorkspaceRequest) workspace.ForkRequest {
	return workspace.ForkRequest{Name: r.Name, KeepSecrets: r.KeepSecrets, Count: r.Count}
}

// forwardPortRequest is a forward's body as the domain's request.
func forwardPortRequest(r client.ForwardPortRequest) workspace.ForwardPortRequest {
	return workspace.ForwardPortRequest{Port: r.Port, HostPort: r.HostPort}
}

// buildTemplateRequest is a template build's body as the domain's request.
func buildTemplateRequest(r client.BuildTemplateRequest) workspace.BuildTemplateRequest {
	return workspace.BuildTemplateRequest{Repo: r.Repo, Base: r.Base, Dockerfile: r.Dockerfile, Name: r.Name}
}

// networkPolicy is a network policy of a request as the domain's.
func networkPolicy(p client.NetworkPolicy) workspace.NetworkPolicy {
	return workspace.NetworkPolicy{Mode: p.Mode, Allow: p.Allow}
}

// networkView is a workspace's network policy as the API shows it.
func networkView(p workspace.NetworkPolicy) client.NetworkPolicy {
	return client.NetworkPolicy{Mode: p.Mode, Allow: p.Allow}
}

// workspaceView is a workspace as the API shows it.
func workspaceView(w workspace.Info) client.Workspace {
	out := client.Workspace{
		ID: w.ID, Name: w.Name, Branch: w.Branch, Worktree: w.Worktree, Template: w.Template,
		Repo: w.Repo, Base: w.Base, BaseCommit: w.BaseCommit,
		Status: string(w.Status), Error: w.Error, Notice: w.Notice,
		Image: w.Image, Network: networkView(w.Network),
		MemoryMB: w.MemoryMB, CPUs: w.CPUs, PidsLimit: w.PidsLimit, DiskMB: w.DiskMB, DiskUsedMB: w.DiskUsedMB,
		Env: w.Env, SecretEnv: w.SecretEnv, Secrets: w.Secrets, ContainerID: w.ContainerID, CreatedAt: w.CreatedAt,
		ForkOf: w.ForkOf, IdleStop: w.IdleStop, IdleStopped: w.IdleStopped, IdlePaused: w.IdlePaused, Placement: w.Placement,
		LastActivity: w.LastActivity,
	}
	if a := w.Agent; a != nil {
		out.Agent = &client.AgentStatus{
			Connected: a.Connected, PID: a.PID, Version: a.Version, StartedAt: a.StartedAt,
			Restarts: a.Restarts, LastRestart: a.LastRestart, LastRestartReason: a.LastRestartReason, Error: a.Error,
		}
	}
	if w.Ports != nil {
		out.Ports = portViews(w.Ports)
	}
	return out
}

// workspaceViews is a list of workspaces as the API shows it (never nil:
// an empty list is []).
func workspaceViews(ws []workspace.Info) []client.Workspace {
	out := make([]client.Workspace, 0, len(ws))
	for _, w := range ws {
		out = append(out, workspaceView(w))
	}
	return out
}

// portView is a forwarded port as the API shows it.
func portView(p workspace.PortForward) client.PortForward {
	return client.PortForward{Port: p.Port, Address: p.Address, URL: p.URL, Connections: p.Connections, CreatedAt: p.CreatedAt}
}

// portViews is a list of forwarded ports as the API shows it (never nil).
func portViews(ps []workspace.PortForward) []client.PortForward {
	out := make([]client.PortForward, 0, len(ps))
	for _, p := range ps {
		out = append(out, portView(p))
	}
	return out
}
