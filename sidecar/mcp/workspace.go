package mcpserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/patina-dev/patina/sidecar/client"
)

func (s *server) addWorkspaceTools(ms *mcp.Server) {
	addTool(s, ms, &mcp.Tool{
		Name:  "workspace_create",
		Title: "Create a workspace",
		Description: "Create a workspace: an isolated Docker container (Linux, bash) whose files are at /workspace, with persistent shell sessions. " +
			"With repo, the workspace is a new git branch patina/<name> of that repository, checked out at /workspace: " +
			"work there with run and the file tools, then diff, commit and merge it back; the user's own checkout is not touched. " +
			"Without repo it is an empty scratch directory without git. Returns the workspace's name: pass it as workspace to the other tools.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(false), OpenWorldHint: ptr(false)},
	}, s.workspaceCreate)
	addTool(s, ms, &mcp.Tool{
		Name:        "workspace_list",
		Title:       "List workspaces",
		Description: "List the workspaces: name, status (running or stopped), git branch and repository.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)},
	}, s.workspaceList)
	addTool(s, ms, &mcp.Tool{
		Name:  "workspace_delete",
		Title: "Delete a workspace",
		Description: "Delete a workspace: its container, shell sessions and files. For a workspace made from a repository, " +
			"its branch patina/<name> is deleted too, with any commits not merged, unless keep_branch is true. Merge first what you want to keep.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, s.workspaceDelete)
	addTool(s, ms, &mcp.Tool{
		Name:  "workspace_stop",
		Title: "Stop a workspace",
		Description: "Stop a workspace's container: its files, branch and sessions' history stay; processes in it (servers, background commands) end. " +
			"workspace_start starts it again; run also starts a workspace that was stopped for being idle.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, s.workspaceStop)
	addTool(s, ms, &mcp.Tool{
		Name:        "workspace_start",
		Title:       "Start a workspace",
		Description: "Start a stopped workspace's container again. Its sessions come back in new shells with their last state (cwd, variables, functions).",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(false), IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, s.workspaceStart)
	addTool(s, ms, &mcp.Tool{
		Name:        "session_list",
		Title:       "List a workspace's sessions",
		Description: "List a workspace's shell sessions: name, working directory, status (idle, running, ended) and the command running now.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)},
	}, s.sessionList)
}

func (s *server) workspaceStop(ctx context.Context, in WorkspaceIn) (string, WorkspaceOut, error) {
	return s.workspaceAction(ctx, in, "Stopped", (*client.Client).StopWorkspace)
}

func (s *server) workspaceStart(ctx context.Context, in WorkspaceIn) (string, WorkspaceOut, error) {
	return s.workspaceAction(ctx, in, "Started", (*client.Client).StartWorkspace)
}

// workspaceAction runs a call answering with the workspace.
func (s *server) workspaceAction(ctx context.Context, in WorkspaceIn, done string,
	call func(*client.Client, context.Context, string) (client.Workspace, error)) (string, WorkspaceOut, error) {
	if err := required("workspace", in.Workspace, "the workspace's name or id"); err != nil {
		return "", WorkspaceOut{}, err
	}
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	var w client.Workspace
	err := s.call(ctx, func(c *client.Client) (err error) {
		w, err = call(c, ctx, in.Workspace)
		return err
	})
	if err != nil {
		return "", WorkspaceOut{}, err
	}
	return fmt.Sprintf("%s workspace %s: it is %s.", done, w.Name, w.Status), workspaceOut(w), nil
}

func (s *server) sessionList(ctx context.Context, in WorkspaceIn) (string, SessionListOut, error) {
	if err := required("workspace", in.Workspace, "the workspace's name or id"); err != nil {
		return "", SessionListOut{}, err
	}
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	var ss []client.Session
	err := s.call(ctx, func(c *client.Client) (err error) {
		ss, err = c.ListSessions(ctx, in.Workspace)
		return err
	})
	if err != nil {
		return "", SessionListOut{}, err
	}
	out := SessionListOut{Sessions: []SessionOut{}}
	var b strings.Builder
	if len(ss) == 0 {
		b.WriteString("No sessions yet: run creates one.")
	}
	for _, x := range ss {
		out.Sessions = append(out.Sessions, SessionOut{ID: x.ID, Cwd: x.Cwd, Status: x.Status, Running: x.Running})
		fmt.Fprintf(&b, "%s: %s in %s", x.ID, x.Status, x.Cwd)
		if x.Running != "" {
			fmt.Fprintf(&b, " (running command %s)", qualifyID(x.ID, x.Running))
		}
		b.WriteString("\n")
	}
	return b.String(), out, nil
}

func (s *server) workspaceCreate(ctx context.Context, in WorkspaceCreateIn) (string, WorkspaceOut, error) {
	req := client.CreateWorkspaceRequest{Name: in.Name, Repo: in.Repo, Base: in.Base, Image: in.Image, Placement: in.Placement,
		Env: in.Env, MemoryMB: in.MemoryMB, CPUs: in.CPUs, PidsLimit: in.PidsLimit, IdleStop: in.IdleStop}
	switch {
	case in.NetworkNone && len(in.NetworkAllow) > 0:
		return "", WorkspaceOut{}, argErrorf("give network_none or network_allow, not both")
	case in.NetworkNone:
		req.Network = &client.NetworkPolicy{Mode: client.NetworkNone}
	case len(in.NetworkAllow) > 0:
		req.Network = &client.NetworkPolicy{Mode: client.NetworkAllow, Allow: in.NetworkAllow}
	}
	if req.Repo != "" {
		req.Repo = expandRepo(req.Repo, s.opts.WorkDir)
	} else if req.Base != "" {
		return "", WorkspaceOut{}, argErrorf("base needs repo: a scratch workspace has no git history to start from")
	}
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	var w client.Workspace
	err := s.call(ctx, func(c *client.Client) (err error) {
		w, err = c.CreateWorkspace(ctx, req)
		return err
	})
	if err != nil {
		return "", WorkspaceOut{}, err
	}
	out := workspaceOut(w)
	var b strings.Builder
	fmt.Fprintf(&b, "Created workspace %q (id %s, image %s). Its files are at /workspace in the container", w.Name, w.ID, w.Image)
	if w.Worktree != "" {
		fmt.Fprintf(&b, " (%s on the user's machine)", w.Worktree)
	}
	b.WriteString(".\n")
	if w.Branch != "" {
		fmt.Fprintf(&b, "It is branch %s of %s, started from %s", w.Branch, w.Repo, strings.TrimPrefix(firstNonEmpty(w.Base, "HEAD"), "refs/heads/"))
		if w.BaseCommit != "" {
			fmt.Fprintf(&b, " (%s)", short(w.BaseCommit))
		}
		b.WriteString(": diff shows your changes, commit records them on the branch, merge brings them back.\n")
	} else {
		b.WriteString("It is a scratch workspace without git.\n")
	}
	fmt.Fprintf(&b, "Next: run(workspace=%q, command=...) or file_write(workspace=%q, path=..., content=...).", w.Name, w.Name)
	return b.String(), out, nil
}

// expandRepo makes a repository path absolute (the sidecar wants one),
// relative to dir; "~" is the user's home.
func expandRepo(repo, dir string) string {
	if repo == "~" || strings.HasPrefix(repo, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			repo = filepath.Join(home, repo[1:])
		}
	}
	if !filepath.IsAbs(repo) && dir != "" {
		repo = filepath.Join(dir, repo)
	}
	return filepath.Clean(repo)
}

func (s *server) workspaceList(ctx context.Context, _ WorkspaceListIn) (string, WorkspaceListOut, error) {
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	var wss []client.Workspace
	err := s.call(ctx, func(c *client.Client) (err error) {
		wss, err = c.ListWorkspaces(ctx)
		return err
	})
	if err != nil {
		return "", WorkspaceListOut{}, err
	}
	out := WorkspaceListOut{Workspaces: []WorkspaceOut{}}
	if len(wss) == 0 {
		return "No workspaces. Create one with workspace_create.", out, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d workspace%s:\n", len(wss), plural(len(wss)))
	for _, w := range wss {
		out.Workspaces = append(out.Workspaces, workspaceOut(w))
		fmt.Fprintf(&b, "- %s (id %s): %s", w.Name, w.ID, w.Status)
		if w.Error != "" {
			fmt.Fprintf(&b, " (%s)", w.Error)
		}
		if w.Branch != "" {
			fmt.Fprintf(&b, ", branch %s of %s", w.Branch, w.Repo)
		} else {
			b.WriteString(", scratch")
		}
		fmt.Fprintf(&b, ", image %s\n", w.Image)
	}
	return strings.TrimSuffix(b.String(), "\n"), out, nil
}

func (s *server) workspaceDelete(ctx context.Context, in WorkspaceDeleteIn) (string, WorkspaceDeleteOut, error) {
	switch {
	case in.Workspace != "" && in.ID != "" && in.Workspace != in.ID:
		return "", WorkspaceDeleteOut{}, argErrorf("workspace and id name different workspaces: give workspace only")
	case in.Workspace == "":
		in.Workspace = in.ID
	}
	if err := required("workspace", in.Workspace, "the workspace's name or id"); err != nil {
		return "", WorkspaceDeleteOut{}, err
	}
	in.ID = in.Workspace
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	err := s.call(ctx, func(c *client.Client) error {
		return c.DeleteWorkspace(ctx, in.ID, client.DeleteOptions{KeepBranch: in.KeepBranch})
	})
	if err != nil {
		return "", WorkspaceDeleteOut{}, err
	}
	text := fmt.Sprintf("Deleted workspace %s.", in.ID)
	if in.KeepBranch {
		text += " Its branch was kept."
	}
	return text, WorkspaceDeleteOut{Deleted: in.ID, KeptBranch: in.KeepBranch}, nil
}

func workspaceOut(w client.Workspace) WorkspaceOut {
	return WorkspaceOut{
		ID: w.ID, Name: w.Name, Status: w.Status, Error: w.Error, Image: w.Image,
		Branch: w.Branch, Repo: w.Repo, Base: w.Base, Worktree: w.Worktree,
	}
}

func ptr[T any](v T) *T { return &v }

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// short abbreviates a commit id.
func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}
