package inside

import (
	"runtime"
	"runtime/debug"

	"github.com/patina-dev/patina/session"
)

// TuneProcess sets the process-wide knobs of an agent (`agent serve`); a
// program's main calls it before Run (Run itself changes no runtime knob).
func TuneProcess() {
	// A small footprint: an agent lives in every workspace.
	debug.SetGCPercent(50)
	// One P: the agent mostly waits (on shells, on its connection) and
	// hands each call between a few goroutines. With one P those handoffs
	// stay on one thread instead of waking another (on a VM, waking an
	// idle CPU costs tens of µs each): exec of `true` through the agent
	// took 10-15% less (BenchmarkHTTPExecTrue, domain p50), and fewer
	// threads hold fewer stacks. Its children (shells, git) are not
	// affected; GOMAXPROCS is not changed in their environment.
	runtime.GOMAXPROCS(1)
	debug.SetMemoryLimit(48 << 20)
	// The sessions' shells are reaped by one goroutine woken by SIGCHLD,
	// not by a thread each.
	session.StartReaper()
}

// TunePause sets the process-wide knobs of a workspace container's init
// (`agent pause`); a program's main calls it before Pause.
func TunePause() {
	// The init only waits and reaps: it keeps its heap as small as it can.
	debug.SetGCPercent(10)
}
