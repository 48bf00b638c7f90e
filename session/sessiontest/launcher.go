// Package sessiontest has helpers for tests that run sessions on this
// machine.
package sessiontest

import (
	"context"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/patina-dev/patina/session"
)

// Launcher is session.LocalLauncher that remembers the process groups it
// starts, so a test can kill every process of its sessions the way a
// container's death does (KillAll), including those a simulated crash of
// their manager left running.
type Launcher struct {
	session.LocalLauncher
	mu    sync.Mutex
	pgids []int
}

// Start implements session.Launcher.
func (l *Launcher) Start(ctx context.Context, p session.Process) error {
	cmd := exec.Command(p.Argv[0], p.Argv[1:]...)
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.Dir = p.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	l.mu.Lock()
	l.pgids = append(l.pgids, cmd.Process.Pid)
	l.mu.Unlock()
	go func() { _ = cmd.Wait() }()
	return nil
}

// KillAll SIGKILLs every process group started so far and waits (up to
// 5 s) until they are gone, as they are once a container has stopped.
func (l *Launcher) KillAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, pg := range l.pgids {
		_ = syscall.Kill(-pg, syscall.SIGKILL)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, pg := range l.pgids {
		for syscall.Kill(-pg, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	l.pgids = nil
}
