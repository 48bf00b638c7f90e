package session

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// The shells LocalLauncher starts live long and are reaped here, by one
// goroutine woken by SIGCHLD, instead of by a goroutine each blocked in
// wait (which costs an OS thread, with its stacks, per session). Only
// the pids started here are waited for, so other children's statuses are
// left to whoever started them.
var reaper struct {
	once sync.Once
	mu   sync.Mutex
	pids map[int]struct{}
}

// reapEvery is how often the reaper looks even without a SIGCHLD
// (signals of the same kind coalesce).
const reapEvery = 10 * time.Second

func reap(pid int) {
	reaper.once.Do(func() {
		reaper.pids = map[int]struct{}{}
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
	reaper.mu.Lock()
	reaper.pids[pid] = struct{}{}
	reaper.mu.Unlock()
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
