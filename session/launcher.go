package session

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// Launcher runs a session's processes wherever its shell lives: on this
// machine (LocalLauncher) or inside a container (the sidecar's Docker
// launcher). Session directories must be visible there at the same path.
type Launcher interface {
	// Start starts a long-lived process detached from the caller (its own
	// process session, stdin/stdout/stderr on /dev/null) and returns once it
	// has started. The process must outlive the caller.
	Start(ctx context.Context, p Process) error
	// Run runs a short helper process to completion and returns its
	// standard output. A non-zero exit is an error.
	Run(ctx context.Context, p Process) ([]byte, error)
}

// Process is a process for a Launcher to run.
type Process struct {
	Argv []string
	// Env is added to the launcher's base environment ("K=V").
	Env []string
	// Dir is the working directory ("" for the launcher's default).
	Dir string
}

// LocalLauncher runs processes on this machine with os/exec. The zero value
// is ready to use.
type LocalLauncher struct{}

// Start implements Launcher.
func (LocalLauncher) Start(ctx context.Context, p Process) error {
	if len(p.Argv) == 0 {
		return fmt.Errorf("start: %w: empty argv", ErrInvalid)
	}
	cmd := exec.Command(localArgv(p.Argv)[0], localArgv(p.Argv)[1:]...)
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.Dir = p.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.Argv[0], err)
	}
	// Reap it when it ends; it is in its own session and survives us.
	reap(cmd.Process)
	return nil
}

// Run implements Launcher.
func (LocalLauncher) Run(ctx context.Context, p Process) ([]byte, error) {
	if len(p.Argv) == 0 {
		return nil, fmt.Errorf("run: %w: empty argv", ErrInvalid)
	}
	cmd := exec.CommandContext(ctx, p.Argv[0], p.Argv[1:]...)
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.Dir = p.Dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return out, fmt.Errorf("run %s: %w: %s", p.Argv[0], err, bytes.TrimSpace(stderr.Bytes()))
		}
		return out, fmt.Errorf("run %s: %w", p.Argv[0], err)
	}
	return out, nil
}

// localArgv makes a started shell see default SIGINT and SIGQUIT handling
// even when this process was started with them ignored (as background jobs
// of a non-interactive shell are): ignored dispositions survive exec, and an
// interactive bash then cannot be interrupted. env --default-signal
// (coreutils 9) resets them.
func localArgv(argv []string) []string {
	if !signal.Ignored(syscall.SIGINT) && !signal.Ignored(syscall.SIGQUIT) {
		return argv
	}
	if _, err := exec.LookPath("env"); err != nil {
		return argv
	}
	return append([]string{"env", "--default-signal=INT,QUIT"}, argv...)
}
