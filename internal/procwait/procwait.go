// Package procwait waits for child processes without holding a Go
// scheduler P in a blocking system call.
//
// os/exec's Wait blocks in waitid. The runtime hands the P of a goroutine
// blocked in a system call to other goroutines only when its monitor
// thread (sysmon) notices, and patina's processes run sysmon at its 10 ms
// tick (GODEBUG schedtrace: sidecar/cmd/patina/sysmon.go) on one P (the
// agent; the sidecar on a small machine). There, a goroutine waiting for a
// git process stalled every other goroutine, every API call of every
// workspace, for 10 to 20 ms. Exited waits through the network poller on a
// pidfd instead, so that the Wait after it only reaps a process that has
// already exited.
package procwait

import (
	"bytes"
	"os"
	"os/exec"

	"golang.org/x/sys/unix"
)

// Exited returns once process p has exited. It does not reap it: p.Wait (or
// the Cmd's Wait) does, at once. If p cannot be watched (no pidfd on this
// kernel, already reaped, out of descriptors), it returns at once and the
// Wait that follows blocks as before.
func Exited(p *os.Process) {
	if p == nil {
		return
	}
	fd, err := unix.PidfdOpen(p.Pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return
	}
	// A non-blocking descriptor goes to the poller; a pidfd becomes
	// readable when its process exits.
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Read(func(fd uintptr) bool {
		// With WNOHANG and nothing to report, Linux leaves the siginfo
		// zeroed; an exited child's has SIGCHLD.
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		return err != nil || info.Signo != 0
	})
}

// Run is cmd.Run with the wait done by Exited.
func Run(cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	Exited(cmd.Process)
	return cmd.Wait()
}

// Output is cmd.Output with the wait done by Exited (cmd.Stdout must be
// unset; a nil cmd.Stderr is not captured into the ExitError).
func Output(cmd *exec.Cmd) ([]byte, error) {
	var out bytes.Buffer
	cmd.Stdout = &out
	err := Run(cmd)
	return out.Bytes(), err
}

// CombinedOutput is cmd.CombinedOutput with the wait done by Exited.
func CombinedOutput(cmd *exec.Cmd) ([]byte, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := Run(cmd)
	return out.Bytes(), err
}
