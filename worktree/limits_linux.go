package worktree

import (
	"errors"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// apply sets l on the running process pid, both soft and hard limits (no
// higher than the hard limits it has already), and turns off core dumps: a
// git stopped by a limit must not write gigabytes of core into the user's
// repository. RLIMIT_DATA bounds what git allocates (malloc, brk, private
// writable maps) but not the packs it maps read-only, so it does not
// grow with the repository's size as RLIMIT_AS would. At the CPU limit
// git gets SIGXCPU, a second later SIGKILL. A process already gone is not
// an error.
func (l procLimits) apply(pid int) error {
	set := func(res int, soft, hard uint64) error {
		var old unix.Rlimit
		if err := unix.Prlimit(pid, res, nil, &old); err != nil {
			return err
		}
		lim := unix.Rlimit{Cur: min(soft, old.Max), Max: min(hard, old.Max)}
		return unix.Prlimit(pid, res, &lim, nil)
	}
	err := set(unix.RLIMIT_CORE, 0, 0)
	if err == nil && l.memory > 0 {
		err = set(unix.RLIMIT_DATA, uint64(l.memory), uint64(l.memory))
	}
	if err == nil && l.cpu > 0 {
		s := l.cpuSeconds()
		err = set(unix.RLIMIT_CPU, s, s+1)
	}
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	return err
}

// hitCPU reports whether the process ps describes was stopped by the CPU
// limit.
func (l procLimits) hitCPU(ps *os.ProcessState) bool {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || l.cpu <= 0 {
		return false
	}
	switch ws.Signal() {
	case syscall.SIGXCPU:
		return true
	case syscall.SIGKILL:
		return ps.UserTime()+ps.SystemTime() >= time.Duration(l.cpuSeconds())*time.Second
	}
	return false
}
