// Package agent is patina's in-workspace agent and the sidecar's client of
// it.
//
// The agent (`patina agent serve`, Server) runs inside each workspace's
// container as a long-lived process. It owns the workspace's persistent
// bash sessions (package session, with a local launcher, their directories
// on the workspace's own volume), its files under /workspace, and its own
// git repository. It serves them on one multiplexed connection (package
// mux): an abstract unix socket in the container's network namespace, which
// the sidecar reaches directly on a local engine or through a `docker exec`
// relay (`patina agent relay`) on any engine.
//
// The sidecar never touches a workspace's files, FIFOs or pids: it asks the
// agent (Client). Everything the agent says is untrusted — the workspace can
// kill the agent and answer in its place — so the Client bounds every reply
// (sizes, counts, deadlines), validates ids, offsets and enums, streams
// output instead of buffering it, and turns anything odd into
// ErrUnavailable for that workspace alone.
//
// # Wire format
//
// One call is one mux stream. The stream header is a JSON object
// {"m": method, "a": arguments}; a request body (stdin, a file's bytes)
// follows as stream data. The answer is a JSON head on one line,
// {"r": result} or {"e": {"code", "msg", ...}}, then, for streaming methods,
// raw bytes until the stream ends. The first call on a connection must be
// "hello" with the workspace's agent token.
package agent
