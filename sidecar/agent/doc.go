// Package agent is the sidecar's client of a workspace's agent.
//
// The agent (package inside, run as `patina agent serve` or by the
// patina-agent command) runs inside each workspace's container as a
// long-lived process. It owns the workspace's persistent bash sessions,
// its files under /workspace, and its own git repository, and serves them
// on one multiplexed connection (package mux): an abstract unix socket in
// the container's network namespace, which the sidecar reaches directly on
// a local engine or through a `docker exec` relay (`patina agent relay`) on
// any engine. What the two say to each other is package wire.
//
// The sidecar never touches a workspace's files, FIFOs or pids: it asks the
// agent (Client). Everything the agent says is untrusted — the workspace can
// kill the agent and answer in its place — so the Client bounds every reply
// (sizes, counts, deadlines), validates ids, offsets and enums
// (validate.go), streams output instead of buffering it, holds what it
// reads against the sidecar's memory budget (share.go), and turns anything
// odd into ErrUnavailable for that workspace alone. It also speaks the
// older protocol of agents that earlier releases put in containers still
// running (compat.go).
//
// This package links nothing of the agent: the sidecar runs no part of it.
package agent
