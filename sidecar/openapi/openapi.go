// Package openapi holds the OpenAPI 3.1 document of the sidecar's HTTP API
// (openapi.json beside this file, the one copy), embedded in the binary and
// served at GET /v1/openapi.json. The end-to-end tests validate every
// request they send and every answer they get against it, and a test of
// package sidecar fails when the router and the document disagree on a
// route: change the document with the API.
package openapi

import _ "embed"

// Document is openapi.json.
//
//go:embed openapi.json
var Document []byte
