package daggerws

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/patina-dev/patina/sidecar/client"
)

// API is the part of the sidecar's client the glue calls; *client.Client
// implements it.
type API interface {
	Addr() string
	CreateWorkspace(ctx context.Context, req client.CreateWorkspaceRequest) (client.Workspace, error)
	ListWorkspaces(ctx context.Context) ([]client.Workspace, error)
	DeleteWorkspace(ctx context.Context, ws string, opts client.DeleteOptions) error
	CreateSession(ctx context.Context, ws string, req client.CreateSessionRequest) (client.Session, error)
	DeleteSession(ctx context.Context, ws, sid string) error
	RestartSession(ctx context.Context, ws, sid string) (client.Session, error)
	Exec(ctx context.Context, ws, sid string, req client.ExecRequest) (client.ExecResult, error)
	OpenOutput(ctx context.Context, ws, sid, cid, stream string, offset int64, follow bool) (io.ReadCloser, error)
	Diff(ctx context.Context, ws string) (client.Diff, error)
	Commit(ctx context.Context, ws string, req client.CommitRequest) (client.CommitResult, error)
	Merge(ctx context.Context, ws string, req client.MergeRequest) (client.MergeResult, error)
}

var _ API = (*client.Client)(nil)

// Connect returns a client for the sidecar at endpoint (a URL such as
// "http://host:port", as Dagger's Service.Endpoint gives it) with token.
// The token is trimmed of surrounding white space: the sidecar's token file
// ends in a newline, so a secret read from it (file:..., cmd:cat ...) does
// too.
func Connect(endpoint, token string) (*client.Client, error) {
	endpoint = strings.TrimSpace(endpoint)
	if endpoint == "" {
		return nil, errors.New("the sidecar's endpoint is empty")
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("the sidecar's endpoint %q is not an http URL", endpoint)
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return nil, ErrNoToken
	}
	return client.New(endpoint, token, nil), nil
}
