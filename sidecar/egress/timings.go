package egress

import "time"

// Fixed timings of the proxy and its DNS server (Config holds those a
// deployment may set: PeekTimeout, DialTimeout).
const (
	// dnsTCPReadWait and dnsTCPWriteWait bound one DNS message over TCP;
	// dnsTCPIdle is how long an idle TCP DNS connection stays open.
	dnsTCPReadWait  = 5 * time.Second
	dnsTCPWriteWait = 5 * time.Second
	dnsTCPIdle      = 10 * time.Second

	// hostsRefresh is how often the host's own addresses (which a
	// workspace never reaches) are read again: an interface may come up.
	hostsRefresh = 2 * time.Second

	// acceptRetry is the pause after a failed accept (out of descriptors,
	// say) before the next: no spinning on the error.
	acceptRetry = 50 * time.Millisecond

	// lookupSlack is how much longer than Config.DialTimeout resolving a
	// name and dialing it may take together.
	lookupSlack = 5 * time.Second

	// refusalWrite bounds writing a refusal (403) to a client that may not
	// read it; closeDrain is how long what a refused or answered client
	// still sends is read and dropped, so that the reset does not destroy
	// the answer before the client reads it.
	refusalWrite = time.Second
	closeDrain   = time.Second
)
