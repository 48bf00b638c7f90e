package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// BuildTemplateRequest is the body of POST /v1/templates: a template made
// from a repository's devcontainer.json (.devcontainer/devcontainer.json,
// else .devcontainer.json) or from a Dockerfile in it.
type BuildTemplateRequest struct {
	// Repo is a path inside a git repository on the sidecar's machine.
	Repo string `json:"repo"`
	// Base is the commit or ref whose files are used (default: HEAD).
	Base string `json:"base,omitempty"`
	// Dockerfile is a Dockerfile's path in the repository, built with its
	// directory as context, in place of a devcontainer.json.
	Dockerfile string `json:"dockerfile,omitempty"`
	// Name tags the template (default: dc- and 12 hex digits of the hash
	// of the content that made it).
	Name string `json:"name,omitempty"`
}

// Template is a workspace template: an image with a project's
// environment, its create commands already run.
type Template struct {
	Name string `json:"name"`
	// Hash is the sha256 of the content that made it: devcontainer.json,
	// the Dockerfile and every file of the build context.
	Hash string `json:"hash"`
	// Image is its image reference (patina-template:<name>); ImageID the
	// image's id.
	Image   string `json:"image"`
	ImageID string `json:"image_id"`
	Repo    string `json:"repo,omitempty"`
	// Source is the file it was made from (.devcontainer/devcontainer.json,
	// a Dockerfile).
	Source string `json:"source,omitempty"`
	// Env is set in its workspaces (containerEnv, remoteEnv); a create's
	// own env wins.
	Env map[string]string `json:"env,omitempty"`
	// WorkspaceFolder is linked to /workspace in its image.
	WorkspaceFolder string `json:"workspace_folder,omitempty"`
	// ForwardPorts are the ports devcontainer.json asks to forward
	// (forward each with POST .../ports once it listens).
	ForwardPorts []int `json:"forward_ports,omitempty"`
	// Ignored are the devcontainer.json properties patina does not apply.
	Ignored []string `json:"ignored,omitempty"`
	// Snapshot names the workspace it was saved from (POST
	// /v1/workspaces/{id}/snapshot): a workspace made from it starts with
	// that workspace's files, repository and sessions, and takes no repo.
	Snapshot  string    `json:"snapshot,omitempty"`
	SizeBytes int64     `json:"size_bytes"`
	CreatedAt time.Time `json:"created_at"`
	// Built says the call built it (false: the same content had made it
	// before).
	Built bool `json:"built"`
}

// SnapshotWorkspaceRequest is the body of POST
// /v1/workspaces/{id}/snapshot: save a running workspace as a template.
type SnapshotWorkspaceRequest struct {
	// Name names the template (required; a template of that name must not
	// exist).
	Name string `json:"name"`
}

// TemplateList is the answer of GET /v1/templates.
type TemplateList struct {
	Templates []Template `json:"templates"`
}

// BuildTemplate builds a repository's template, or finds the one the
// same content made.
func (c *Client) BuildTemplate(ctx context.Context, req BuildTemplateRequest) (Template, error) {
	var out Template
	err := c.do(ctx, http.MethodPost, "/v1/templates", req, &out)
	return out, err
}

// SnapshotWorkspace saves a running workspace as a template: its
// container's filesystem, its files and its sessions' state (cwd,
// variables, functions, history). Create from it with
// CreateWorkspaceRequest.Template.
func (c *Client) SnapshotWorkspace(ctx context.Context, ws string, req SnapshotWorkspaceRequest) (Template, error) {
	var out Template
	err := c.do(ctx, http.MethodPost, "/v1/workspaces/"+esc(ws)+"/snapshot", req, &out)
	return out, err
}

// ListTemplates lists the templates.
func (c *Client) ListTemplates(ctx context.Context) ([]Template, error) {
	var out TemplateList
	err := c.do(ctx, http.MethodGet, "/v1/templates", nil, &out)
	return out.Templates, err
}

// GetTemplate describes one template.
func (c *Client) GetTemplate(ctx context.Context, name string) (Template, error) {
	var out Template
	err := c.do(ctx, http.MethodGet, "/v1/templates/"+esc(name), nil, &out)
	return out, err
}

// DeleteTemplate removes a template (409 while a workspace uses it).
func (c *Client) DeleteTemplate(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/templates/"+esc(name), nil, nil)
}

// TemplateProgress is a line of POST /v1/templates?progress=1's NDJSON
// answer: build output, then the template or the error.
type TemplateProgress struct {
	Progress string    `json:"progress,omitempty"`
	Template *Template `json:"template,omitempty"`
	Error    string    `json:"error,omitempty"`
	Code     string    `json:"code,omitempty"`
}

// BuildTemplateProgress is BuildTemplate with the build's output written
// to progress as it comes.
func (c *Client) BuildTemplateProgress(ctx context.Context, req BuildTemplateRequest, progress io.Writer) (Template, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return Template{}, err
	}
	resp, err := c.send(ctx, http.MethodPost, "/v1/templates?progress=1", bytes.NewReader(b), "application/json", nil)
	if err != nil {
		return Template{}, err
	}
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-ndjson") {
		var t Template
		if err := json.NewDecoder(resp.Body).Decode(&t); err != nil {
			return Template{}, fmt.Errorf("POST /v1/templates: decode answer: %w", err)
		}
		return t, nil
	}
	dec := json.NewDecoder(resp.Body)
	for {
		var l TemplateProgress
		if err := dec.Decode(&l); err != nil {
			return Template{}, fmt.Errorf("POST /v1/templates: the answer ended before the template: %w", err)
		}
		switch {
		case l.Template != nil:
			return *l.Template, nil
		case l.Error != "" || l.Code != "":
			return Template{}, &APIError{Status: http.StatusBadRequest, Code: l.Code, Message: l.Error}
		case progress != nil:
			_, _ = io.WriteString(progress, l.Progress)
		}
	}
}
