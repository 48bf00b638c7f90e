package agent

import "time"

// The client's waits, each with its reason (the per-call bounds are
// ClientConfig's: CallTimeout, HelloTimeout, RecoverTimeout).
const (
	// An agent just started answers within tens of ms: dial every
	// dialFirst for the first dialQuickly (a failed dial costs µs), then
	// back off, doubling, up to dialMaxWait.
	dialFirst   = 5 * time.Millisecond
	dialQuickly = 200 * time.Millisecond
	dialMaxWait = 250 * time.Millisecond
	// findStartedTimeout bounds asking an agent whether a command whose
	// answer was lost had started (an agent that cannot say this quickly
	// does not deserve long); findStartedPoll is how often it is asked.
	findStartedTimeout = 5 * time.Second
	findStartedPoll    = 100 * time.Millisecond
	// clockSkew is how much earlier than its sending a command's recorded
	// start may be and still be that command (the agent's clock is the
	// container's, the same kernel's, but stamped on the other side).
	clockSkew = time.Second
	// stopEscalation is added to a command's own timeout while waiting for
	// it: the stop (SIGINT, grace, SIGKILL) takes up to that.
	stopEscalation = time.Minute
	// stopWaitTimeout bounds stopping a command whose caller left and
	// waiting for its result.
	stopWaitTimeout = 30 * time.Second
)
