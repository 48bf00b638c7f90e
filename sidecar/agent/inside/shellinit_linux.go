package inside

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// shellInitName is $0 of the shell that becomes the container's init:
// what `ps` shows as PID 1.
const shellInitName = "patina-init"

// shellInitScript is that shell's program (%[1]s: patina's init, quoted,
// which a shell that is not bash execs again; %[2]d: the read end of a
// pipe it holds both ends of, no data and never EOF). It blocks in read, with only
// builtins, so it never forks. bash reaps any child that ends, its own or
// an orphan given to PID 1 (its SIGCHLD handler waits for any pid; the
// CHLD it sends itself reaps one that ended before the handler was
// there), and on SIGTERM or SIGINT it exits, ending the container, as
// Pause does.
const shellInitScript = `[ -n "$BASH_VERSION" ] || exec %[1]s agent pause
trap 'exit 0' TERM INT
kill -s CHLD $$
while :; do read -r -u %[2]d _; done`

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
	// A bash that is a link to another program (busybox, which takes
	// its applet from argv[0], or dash) would end the container.
	real, err := filepath.EvalSymlinks(bash)
	if err != nil {
		return err
	}
	if filepath.Base(real) != "bash" {
		return fmt.Errorf("%s is %s, not bash", bash, real)
	}
	self, err := os.Executable()
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
	quoted := "'" + strings.ReplaceAll(self, "'", `'\''`) + "'"
	err = syscall.Exec(bash, []string{shellInitName, "-c", fmt.Sprintf(shellInitScript, quoted, rfd)}, []string{})
	inherit(false)
	r.Close()
	w.Close()
	return fmt.Errorf("exec %s: %w", bash, err)
}
