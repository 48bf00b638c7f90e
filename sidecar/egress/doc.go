// Package egress is a workspace's network boundary, on the host: a
// transparent TCP proxy and a DNS server that the sidecar runs on the
// gateway of its workspaces' bridge, the host firewall rules that send
// every connection and DNS query of a workspace there (and refuse
// everything else), and the policy each workspace is held to.
//
// A workspace is known by the source address of its connections (the
// sidecar tells Set which address each workspace has, from the engine,
// never from the workspace). The destination it asked for comes from the
// kernel (SO_ORIGINAL_DST). Names are matched where the workspace cannot
// lie about them: the TLS ClientHello's server name and each HTTP
// request's Host, the upstream address being resolved by the proxy itself.
// Nothing here imports Docker or HTTP handlers; see DESIGN.md for why it
// is built this way.
package egress
