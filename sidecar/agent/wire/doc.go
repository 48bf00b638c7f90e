// Package wire is the protocol between the sidecar and a workspace's agent:
// the methods, their requests and results, the error codes and the
// sentinels they stand for, the frames of a terminal stream, the move of a
// connection to pipes, and the constants both sides need (SocketName,
// TokenEnv, the limits). The agent (package inside) serves it; the
// sidecar's client of it (package agent) calls it. Neither side is in
// here.
//
// The agent runs in the workspace, whose root can kill it and answer in
// its place: everything decoded on the sidecar's side is untrusted. What
// this package decodes for the sidecar (DecodeError, CleanText, ReadFrame)
// bounds and cleans it; the client checks every result it reads before
// use (sidecar/agent/validate.go).
//
// # Wire format
//
// One call is one mux stream. The stream header is a JSON object
// {"m": method, "a": arguments} (Call); a request body (stdin, a file's
// bytes) follows as stream data. The answer is a JSON head on one line
// (Head), {"r": result} or {"e": {"code", "msg", ...}} (Error), then, for
// streaming methods, raw bytes until the stream ends. The first call on a
// connection must be "hello" with the workspace's agent token.
package wire
