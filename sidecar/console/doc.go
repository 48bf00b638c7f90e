// Package console is patina's web console: a small page (assets/, embedded
// in the binary) that a person signs in to with the sidecar's token or a
// one-time code from `patina ui`, and that then uses only the public /v1
// API, with a per-browser key as its bearer.
//
// It owns the sign-in (Keys: one-time codes and browser keys, bounded and
// expiring, each key with a preview-only secret for the preview cookie,
// which browsers also send to a workspace's forward on another port of the
// host), where a key may be used (KeyOK) and the preview cookie
// (PreviewAuthorized), the page's security headers (a strict
// Content-Security-Policy: no inline script, no framing, same origin only)
// and the serving of xterm.js from the Debian package that ships it. It knows nothing of
// workspaces; the sidecar mounts its Handler and asks it whether a bearer
// is a browser key that the request may use.
package console
