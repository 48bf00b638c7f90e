package session

import "time"

// Fixed timings of the session driver. Those a user or a test may want to
// change are Config fields (StartTimeout, InterruptGrace, SnapshotDelay,
// PrepareWait); these bound work that is normally over in milliseconds.
const (
	// lineWriteWait bounds a write of one line to the shell's command
	// FIFO: the shell drains it between commands and the driver writes at
	// most a few lines ahead, so only a stuck shell makes it wait.
	lineWriteWait = 5 * time.Second

	// stopSignalTimeout bounds the killtree run that sends a stop's first
	// signals (a short bash script reading /proc).
	stopSignalTimeout = 10 * time.Second

	// escalateTimeout bounds a stop's escalation after the grace periods:
	// the killtree runs and, if the shell does not come back, its
	// replacement.
	escalateTimeout = 30 * time.Second

	// hangupWait is how long killAll lets the session's processes end on
	// SIGHUP (an interactive bash passes it to its jobs) before SIGKILL.
	hangupWait = 100 * time.Millisecond

	// closeTimeout bounds Close's killing of the session's processes.
	closeTimeout = 10 * time.Second

	// closeEOFWait is how long Close waits for the status FIFO's EOF once
	// the processes are killed: a descendant that escaped both the tree
	// and the marker may hold it open for good.
	closeEOFWait = 2 * time.Second

	// flushPoll is how often FlushSnapshots looks whether the pending
	// snapshots are written (each takes about a millisecond).
	flushPoll = 5 * time.Millisecond
)
