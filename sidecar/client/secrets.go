package client

import (
	"context"
	"net/http"
	"time"
)

// SetSecretRequest is the body of PUT /v1/secrets/{name}: the header the
// sidecar's egress proxy sets on HTTPS requests to the hosts, from the
// workspaces granted the secret.
type SetSecretRequest struct {
	// Hosts are DNS names ("api.github.com") or wildcards
	// ("*.githubusercontent.com"); Host is one more.
	Host  string   `json:"host,omitempty"`
	Hosts []string `json:"hosts,omitempty"`
	// Header is "Name: value" ("Authorization: Bearer …").
	Header string `json:"header"`
}

// Secret describes a secret: its value is never shown.
type Secret struct {
	Name  string   `json:"name"`
	Hosts []string `json:"hosts"`
	// Header is the header's name.
	Header    string    `json:"header"`
	UpdatedAt time.Time `json:"updated_at"`
}

// SecretList is the answer of GET /v1/secrets.
type SecretList struct {
	Secrets []Secret `json:"secrets"`
}

// SetSecret makes or replaces a secret.
func (c *Client) SetSecret(ctx context.Context, name string, req SetSecretRequest) (Secret, error) {
	var out Secret
	err := c.do(ctx, http.MethodPut, "/v1/secrets/"+esc(name), req, &out)
	return out, err
}

// ListSecrets lists the secrets (names, hosts and header names only).
func (c *Client) ListSecrets(ctx context.Context) ([]Secret, error) {
	var out SecretList
	err := c.do(ctx, http.MethodGet, "/v1/secrets", nil, &out)
	return out.Secrets, err
}

// DeleteSecret removes a secret: workspaces holding it get nothing more
// for it.
func (c *Client) DeleteSecret(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/secrets/"+esc(name), nil, nil)
}
