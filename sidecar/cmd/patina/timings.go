package main

import "time"

// Fixed timings of the CLI (the user sets the others by flags: the
// serve's --shutdown-timeout, a command's --timeout-ms, ...).
const (
	// healthWait bounds one health check while a lost exec waits for the
	// sidecar to come back (comebackPoll apart).
	healthWait = 2 * time.Second

	// attachEOFSettle is how long `attach` with a non-terminal stdin lets
	// the shell read what was sent before it sends the EOF that ends it.
	attachEOFSettle = 200 * time.Millisecond
	// reattachBackoff is the first pause between reattaching tries to a
	// terminal (the n-th waits n times as long).
	reattachBackoff = 500 * time.Millisecond

	// lockPoll is how often a held state-directory lock is tried again.
	lockPoll = 50 * time.Millisecond

	// findTimeout bounds the MCP server's check that a sidecar answers and
	// takes its token; startRacePoll is how often it looks again while a
	// `patina serve` may be starting (startRace).
	findTimeout   = 30 * time.Second
	startRacePoll = 100 * time.Millisecond
	// embeddedShutdown bounds the stop of a sidecar the MCP server started
	// in its own process.
	embeddedShutdown = 10 * time.Second

	// localKeepAlive and localIdleConn: TCP keep-alive of, and how long an
	// idle connection is kept to, a sidecar on this machine.
	localKeepAlive = 30 * time.Second
	localIdleConn  = 30 * time.Second

	// copyWithin bounds `cp`: a copy takes as long as its bytes do; the
	// sidecar's own deadlines bound it, and Ctrl-C ends it.
	copyWithin = 24 * time.Hour

	// agentImageTimeout bounds `image agent` (building and checking the
	// agent image); removeVolumesWait bounds `agent remove-volumes`,
	// which waits for the container to let go of them.
	agentImageTimeout = 5 * time.Minute
	removeVolumesWait = 30 * time.Second

	// espCheckTimeout bounds `serve --engine swarm`'s check that the
	// kernel has IPsec ESP (a few `ip xfrm` calls).
	espCheckTimeout = 10 * time.Second
	// metricsReadHeader bounds a metrics scraper's request head.
	metricsReadHeader = 10 * time.Second
)
