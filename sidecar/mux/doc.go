// Package mux carries many independent byte streams over one connection:
// the channel between the sidecar and a workspace's agent (see
// sidecar/DESIGN.md). It is deliberately small, and written for a peer that
// may be hostile: the agent runs inside the workspace, where anything can
// replace it.
//
// A stream is opened with a header (the request) and then carries bytes
// both ways until each side closes its half. Every frame has a fixed
// 12-byte header and a bounded payload; a stream's receiver advertises a
// window and the sender never sends more than that window ahead of what was
// read, so a slow or absent reader costs at most its window and never blocks
// the connection or other streams. A window starts at InitialWindow (4 KiB)
// and doubles up to Window (256 KiB) as its reader keeps up, drawing the
// growth from Config.Budget (its spare half): a stream nobody reads costs
// 4 KiB, and the sum of the larger windows is bounded by the budget. A peer that
// breaks the rules (an oversized frame, data beyond its window, a frame of
// unknown type, too many streams, silence past the keep-alive) loses the
// connection; nothing it sends can make this side allocate more than
// Config's bounds or wait without a deadline.
//
// Streams are opened by either side: the dialer (Client) uses odd ids, the
// listener (Server) even ids. A side accepts at most Config.MaxStreams
// streams opened by its peer at a time.
//
// A request/response exchange costs one frame each way: Open with FIN (a
// header and no body), and WriteFinal (the answer with FIN).
package mux
