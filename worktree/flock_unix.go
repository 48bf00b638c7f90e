//go:build unix

package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// flock polls a lock that is held from flockFirstPoll, doubling up to
// flockMaxPoll: a repository's locks are held for one git command (tens of
// milliseconds), so a waiter gets it soon after, without spinning.
const (
	flockFirstPoll = time.Millisecond
	flockMaxPoll   = 50 * time.Millisecond
)

// flock takes an exclusive flock(2) on path, polling (without blocking a
// thread) until it is free or ctx is done. The lock file is never removed:
// removing lock files races with their users.
func flock(ctx context.Context, path string) (release func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	wait := flockFirstPoll
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, flockMaxPoll)
	}
}

// tryFlock takes an exclusive flock(2) on path if it is free, without
// waiting. ok is false if another holder has it.
func tryFlock(path string) (release func(), ok bool, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, false, fmt.Errorf("lock %s: %w", path, err)
	}
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		f.Close()
		return nil, false, nil
	}
	if err != nil {
		f.Close()
		return nil, false, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, true, nil
}
