package inside

import "time"

// The agent's waits, each with its reason. (The terminal's are in
// server_terminal.go, the memory release's in memory.go, a session call's
// in server_sessions.go: sessionCallTimeout, quickWait.)
const (
	// takeoverWait bounds how long a new agent waits for the one it
	// replaces to let go of the socket, the TCP port and the sessions'
	// lock (it was killed: a moment); takeoverPoll is how often it looks.
	takeoverWait = 10 * time.Second
	takeoverPoll = 50 * time.Millisecond
	// gitIdentityTimeout bounds setting the container's git identity (two
	// git config calls; an image whose git hangs does not hold the agent).
	gitIdentityTimeout = 10 * time.Second
	// handshakeTimeout bounds a new connection's setup: taking over the
	// sidecar's pipes and the hello with its token (a sidecar that
	// connects and says nothing does not hold a goroutine longer).
	handshakeTimeout = 30 * time.Second
	// flushTimeout bounds snapshotting every session before the workspace
	// stops (each snapshot is a small file; the stop does not wait more).
	flushTimeout = 5 * time.Second
	// reviveTimeout bounds giving an ended session a new shell from its
	// snapshot (a shell start and a restore, on a busy machine).
	reviveTimeout = time.Minute
	// restartQuick and restartSlow are how long the init waits before it
	// starts its kept command again: quickly after a long run, slowly
	// after one that lived under shortLived (it is failing at start, and
	// must not spin).
	restartQuick = 500 * time.Millisecond
	restartSlow  = 5 * time.Second
	shortLived   = 10 * time.Second
	// shellInitDelay is how long an init that started the first agent
	// once (agent pause --once) waits before it becomes bash: past the
	// agent's start and a create's first exec.
	shellInitDelay = 2 * time.Second
)
