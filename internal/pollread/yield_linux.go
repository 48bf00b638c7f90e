package pollread

import "golang.org/x/sys/unix"

// pollSupported: polling can be turned on on Linux only.
const pollSupported = true

// yieldCPU lets other threads and processes on this CPU run first.
func yieldCPU() { _, _, _ = unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }
