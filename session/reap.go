package session

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// The shells LocalLauncher starts live long. By default each is waited for
// by a goroutine blocked in wait, which holds an OS thread (with its
// stacks) per session. A program that runs many sessions (the agent) calls
// StartReaper from its main instead: then they are reaped by one goroutine
// woken by SIGCHLD. Only the pids started here are waited for, so other
// children's statuses are left to whoever started them.
var reaper struct {
	once sync.Once
	on   bool // StartReaper was called (set under mu)
	mu   sync.Mutex
	pids map[int]struct{}
}

// reapEvery is how often the reaper looks even without a SIGCHLD
// (signals of the same kind coalesce).
const reapEvery = 10 * time.Second

// StartReaper makes this process reap the processes LocalLauncher starts
// from one goroutine woken by SIGCHLD, instead of a goroutine and a thread
// each. It installs a process-wide SIGCHLD handler (signal.Notify), so a
// program's main calls it, before its first session; later calls do
// nothing.
func StartReaper() {
	reaper.once.Do(func() {
		reaper.mu.Lock()
		reaper.pids = map[int]struct{}{}
		reaper.on = true
		reaper.mu.Unlock()
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGCHLD)
		go func() {
			t := time.NewTicker(reapEvery)
			for {
				select {
				case <-ch:
				case <-t.C:
				}
				reapExited()
			}
		}()
	})
}

// reap has p waited for once it exits: by the reaper if StartReaper was
// called, else by a goroutine of its own.
func reap(p *os.Process) {
	reaper.mu.Lock()
	on := reaper.on
	if on {
		pid := p.Pid
		_ = p.Release()
		reaper.pids[pid] = struct{}{}
	}
	reaper.mu.Unlock()
	if !on {
		go func() { _, _ = p.Wait() }()
		return
	}
	reapExited() // it may be gone already
}

// reapExited waits, without blocking, for each tracked pid.
func reapExited() {
	reaper.mu.Lock()
	defer reaper.mu.Unlock()
	for pid := range reaper.pids {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		if got == pid || err == syscall.ECHILD {
			delete(reaper.pids, pid)
		}
	}
}
