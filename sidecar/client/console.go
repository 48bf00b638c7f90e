package client

import (
	"context"
	"net/http"
)

// ConsoleCode asks for a one-time code that signs a browser in to the web
// console (POST /v1/console/codes); open Addr() + code.Path.
func (c *Client) ConsoleCode(ctx context.Context) (ConsoleCode, error) {
	var out ConsoleCode
	err := c.do(ctx, http.MethodPost, "/v1/console/codes", nil, &out)
	return out, err
}
