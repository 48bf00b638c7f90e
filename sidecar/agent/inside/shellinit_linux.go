package inside

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// shellInitName is $0 of the shell that becomes the container's init:
// what `ps` shows as PID 1.
const shellInitName = "patina-init"

// shellInitScript is that shell's program. It blocks in read on a pipe it
// holds both ends of (fd %d the read end: no data, never EOF), with only
// builtins, so it never forks. bash reaps any child that ends, its own or
// an orphan given to PID 1 (its SIGCHLD handler waits for any pid), and
// on SIGTERM or SIGINT it exits, ending the container, as Pause does.
const shellInitScript = `trap 'exit 0' TERM INT
while :; do read -r -u %d _; done`

// execShellInit replaces this process (the container's init, which has
// started the first agent and holds nothing more) with bash, running
// shellInitScript with an empty environment: what it did from then on,
// for about 0.3 MB of memory, its pages shared with the sessions' shells,
// where a Go runtime of its own takes 1.2-1.8 MB and a handful of threads.
// It returns only if it cannot: no bash on the container's PATH, or the
// exec failed; the caller then goes on as the init itself.
func execShellInit() error {
	bash, err := exec.LookPath("bash")
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	rfd, wfd := int(r.Fd()), int(w.Fd())
	inherit := func(on bool) {
		flag := unix.FD_CLOEXEC
		if on {
			flag = 0
		}
		_, _ = unix.FcntlInt(uintptr(rfd), unix.F_SETFD, flag)
		_, _ = unix.FcntlInt(uintptr(wfd), unix.F_SETFD, flag)
	}
	inherit(true)
	// A child that ended before the exec would wait for the next SIGCHLD
	// to be reaped: reap it now.
	for {
		var ws syscall.WaitStatus
		if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
			break
		}
	}
	err = syscall.Exec(bash, []string{shellInitName, "-c", fmt.Sprintf(shellInitScript, rfd)}, []string{})
	inherit(false)
	r.Close()
	w.Close()
	return fmt.Errorf("exec %s: %w", bash, err)
}
