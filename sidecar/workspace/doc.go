// Package workspace is the sidecar's domain: it keeps the workspaces (one
// container each, run by an Engine, with patina's agent inside), their
// sessions (through the agent), their files (through the agent) and, for a
// repository workspace, their git state (package worktree on the host, the
// workspace's own repository inside). Manager is the API the HTTP adapter
// (package sidecar) calls; it speaks its own values throughout. For
// workspaces and their requests (Info, CreateRequest, ForkRequest,
// NetworkPolicy, PortForward, ...) the adapter translates to and from
// the API's wire types once (sidecar/wire_workspace.go). For sessions,
// commands, exec results, files, output, git results and the log it
// speaks its own values (results.go), made once where the agent's and
// package worktree's answers come in (convert.go): an adapter needs none
// of the packages the domain drives (TestManagerSpeaksItsOwnValues).
//
// Its boundaries: an engine is reached only through Engine, in
// sidecar/engine's values (this package imports no engine's package:
// TestImportsNoEnginePackage); nor does it import the HTTP API's
// package, sidecar/client (TestImportsNoAPIPackage); the agent is reached
// through package agent, its protocol being sidecar/agent/wire; every
// failure the adapters see is one of this package's kinds (Kind:
// ErrInvalid, ErrNotFound, ErrBusy, ErrConflict, ...), whatever package
// it came from; and a request is checked once, whichever adapter made it:
// by its Validate, or a create, whose checks need the Manager's
// configuration, by the Manager (validateCreate).
//
// What the Manager trusts: its own records (<state>/workspaces/<id>/
// workspace.json), the engine's answers about containers, and the user's
// repository. What it does not: anything the agent says (package agent
// validates it), and the workspace's state note (it travels with the
// repository and is compared with the record, never obeyed for a path,
// mount or container setting).
//
// Liveness: a workspace being adopted at start reports "adopting" while
// the API already serves others; calls that need it wait for its adoption
// (bounded by their context and AdoptWait). Lifecycle changes of one
// workspace are serialised by a lock that honours contexts; nothing holds
// the Manager's own lock across a Docker or agent call.
package workspace
