// Package bench measures a patina sidecar on this machine, in one run
// against one workspace container, and checks the figures against patina's
// targets:
//
//   - exec of `true` through the sidecar's HTTP API (sequential, one
//     keep-alive connection) against one Docker API exec (create + attach +
//     inspect) in the same container: p50 ≤ 0.5 ms and ≥ 75× faster;
//   - workspace create → first exec: ≤ 1 s;
//   - N sessions × M execs concurrently (100 × 100 by default): ≥ 2,000
//     exec/s with 0 errors;
//   - the sidecar's resident memory with those sessions idle: ≤ 50 MB.
//
// [Run] starts a sidecar of its own as a child process (`patina serve` on a
// free port, with a temporary state directory and a generated token) so that
// it can read the process's RSS from /proc, and removes it, its workspaces
// and the directory at the end. The result is a [Report], which marshals
// to JSON and prints as a table with [Report.WriteText].
//
// Other measurements, each with a sidecar of its own: [Density] (how many
// idle workspaces this host holds, each timed to an exec), [Burst] (many
// creates at once, with a warm pool as large and without), [Runtimes]
// (runc against runsc) and [RunSwarm] (a workspace on another node).
package bench
