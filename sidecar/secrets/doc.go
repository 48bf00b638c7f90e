// Package secrets keeps credentials that never enter a workspace: each
// secret is an HTTP header (its value held only by the sidecar, in
// <state>/secrets.json, 0600) that the egress proxy sets on the requests a
// workspace granted it sends to the secret's hosts over HTTPS. The
// workspace holds a placeholder only: an environment variable whose value
// is a harmless per-workspace token, swapped for the real value wherever
// it appears in a request's headers to those hosts.
//
// To see those requests, the Vault is the egress proxy's TLSHook: it
// terminates TLS for the hosts of the secrets a workspace holds, with a
// certificate from the sidecar's own CA (its key 0600 in the state
// directory, its certificate installed in the workspace's trust store by
// the agent), and forwards each request to the real server over a new TLS
// connection that verifies the server's certificate against the system's
// roots. Every other connection is left to the proxy, which tunnels it
// untouched. A Redactor takes the values out of the sidecar's logs and
// the workspaces' event logs. See DESIGN.md.
package secrets
