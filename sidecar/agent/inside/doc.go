// Package inside is what runs inside a workspace's container: patina's
// in-container program, as `patina agent ...` (the patina binary, mounted
// read-only at /.patina/bin) or as the patina-agent command, which links
// nothing else.
//
//   - The agent (Run, `agent serve`; Server): a long-lived process that
//     owns the workspace's persistent bash sessions (package session, with
//     a local launcher, their directories on the workspace's own volume),
//     its files under /workspace, its own git repository (WorkspaceGit,
//     worktree.Inside) and its terminals, and serves them to the sidecar in
//     the protocol of package wire, on an abstract unix socket
//     (wire.SocketName) and, on a cluster, a TCP port.
//   - The container's init (Pause, `agent pause`), PID 1: it reaps orphans
//     and may keep the agent running; one that starts the first agent once
//     (--once) then becomes the image's bash (shellinit_linux.go), which
//     reaps and waits for a fraction of a Go runtime's memory.
//   - The relay (Relay, `agent relay`) a sidecar that cannot enter the
//     container's network namespace reaches the agent through, by docker
//     exec.
//   - A fork's copier (CopyTree, `agent copy`), run in a helper container,
//     and a swarm node's binary check (CheckBinary, `agent check-binary`).
//
// The agent's token is taken out of the environment before anything else
// (secretenv_*.go), and the process keeps small (memory.go; the runtime
// knobs are set by a program's main through TuneProcess and TunePause).
// Nothing of the sidecar is linked here: the sidecar's client of the agent
// is package agent.
package inside
