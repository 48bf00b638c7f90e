package container

import "time"

// Fixed timings of the Swarm engine: what a manager and its nodes take is
// seconds, and these bound it (the per-call Docker API timeouts are
// elsewhere).
const (
	// sweepTimeout bounds the removal, at start, of the secrets and
	// networks that workspaces which never started left behind.
	sweepTimeout = 20 * time.Second
	// sweepVolumesTimeout bounds the removal of those workspaces' volumes
	// (in the background: a node may take a while to answer).
	sweepVolumesTimeout = 5 * time.Minute

	// watchPoll is how often Watch lists the services: task changes are
	// not events a manager reports.
	watchPoll = 2 * time.Second

	// taskStopGrace is how long a workspace's task has after SIGTERM
	// before Swarm kills it.
	taskStopGrace = 5 * time.Second

	// placeTimeout bounds the wait for a service's task to run.
	placeTimeout = 2 * time.Minute
	// startTimeout bounds Start's wait for a running task, nudges
	// included; startNudgeEvery is how long one wait lasts before the
	// task is nudged (a forced update).
	startTimeout    = 2 * time.Minute
	startNudgeEvery = 20 * time.Second

	// stopSlack is how much longer than its stop timeout a task may take
	// to be gone after the service scales to none.
	stopSlack = 10 * time.Second

	// objectsFreeWait bounds the wait for a workspace's tasks to be gone,
	// which keep its secret and network in use.
	objectsFreeWait = 30 * time.Second

	// agentStartTimeout bounds StartAgent; agentDialTimeout bounds one
	// dial of the agent; relayRefreshAfter is when the relay is attached
	// to the workspace's network anew (an overlay's peers may take that
	// long to be learnt again).
	agentStartTimeout = time.Minute
	agentDialTimeout  = 5 * time.Second
	relayRefreshAfter = 15 * time.Second
)
