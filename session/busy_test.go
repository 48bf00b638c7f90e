package session

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// An exec that waits for its output files (their making ahead is slowed
// here until the test lets it go) holds the session reserved, not locked:
// a second exec gets ErrBusy at once and Info answers, while the first is
// still waiting; then the first runs as usual. Goroutines spinning on every
// CPU stand in for load.
func TestBusyWhilePreparing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs bash")
	}
	release := make(chan struct{})
	var releaseOnce sync.Once
	var slow atomic.Bool
	m := newManager(t, func(c *Config) {
		c.PrepareWait = time.Minute
		c.prepareHook = func() {
			if slow.Load() {
				<-release
			}
		}
	})
	// Before the session's own cleanup (which waits for the making).
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	s := mustCreate(t, m, CreateRequest{})
	slow.Store(true)
	run(t, s, "true") // its finish starts making command 3's files: held
	run(t, s, "true") // command 2's files were made before

	stopLoad := make(chan struct{})
	var load sync.WaitGroup
	for range 4 {
		load.Add(1)
		go func() {
			defer load.Done()
			for {
				select {
				case <-stopLoad:
					return
				default:
				}
			}
		}()
	}
	defer func() { close(stopLoad); load.Wait() }()

	first := make(chan error, 1)
	go func() {
		_, err := s.Exec(context.Background(), ExecRequest{Command: "echo first"})
		first <- err
	}()
	waitFor(t, "the first exec to reserve the session", 10*time.Second, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.starting
	})

	second := make(chan error, 1)
	go func() {
		_, err := s.Exec(context.Background(), ExecRequest{Command: "echo second"})
		second <- err
	}()
	select {
	case err := <-second:
		if !errors.Is(err, ErrBusy) {
			t.Fatalf("exp ErrBusy for the second exec, got %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second exec waited behind the first one's preparation")
	}
	info := make(chan Info, 1)
	go func() { info <- s.Info() }()
	select {
	case <-info:
	case <-time.After(10 * time.Second):
		t.Fatal("Info waited behind an exec's preparation")
	}
	select {
	case err := <-first:
		t.Fatalf("exp the first exec still waiting for its files, it returned %v", err)
	default:
	}

	releaseOnce.Do(func() { close(release) })
	select {
	case err := <-first:
		if err != nil {
			t.Fatalf("first exec: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the first exec did not finish once its files were made")
	}
	if res := run(t, s, "echo again"); string(res.Stdout.Data) != "again\n" {
		t.Errorf("exp %q, got %q", "again\n", res.Stdout.Data)
	}
}
