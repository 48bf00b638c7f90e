package budget

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestAcquireWaitsForRelease(t *testing.T) {
	b := New(100)
	if err := b.Acquire(context.Background(), 80); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- b.Acquire(context.Background(), 40) }()
	select {
	case err := <-got:
		t.Fatalf("exp Acquire to wait while 80 of 100 are taken, got %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	b.Release(80)
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Acquire still waits after Release")
	}
	if exp, got := int64(40), b.Used(); exp != got {
		t.Fatalf("used: exp %d, got %d", exp, got)
	}
}

func TestAcquireHonoursDeadline(t *testing.T) {
	b := New(10)
	if err := b.Acquire(context.Background(), 10); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := b.Acquire(ctx, 1)
	if !errors.Is(err, ErrSpent) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("exp ErrSpent wrapping the deadline, got %v", err)
	}
	b.Release(10)
	if exp, got := int64(0), b.Used(); exp != got {
		t.Fatalf("a waiter that gave up kept bytes: exp %d used, got %d", exp, got)
	}
}

func TestClampLargerThanSize(t *testing.T) {
	b := New(10)
	if err := b.Acquire(context.Background(), 1000); err != nil {
		t.Fatal(err)
	}
	if exp, got := int64(10), b.Used(); exp != got {
		t.Fatalf("used: exp %d, got %d", exp, got)
	}
	b.Release(1000)
	if exp, got := int64(0), b.Used(); exp != got {
		t.Fatalf("used: exp %d, got %d", exp, got)
	}
}

func TestTryAcquireDoesNotJumpTheQueue(t *testing.T) {
	b := New(10)
	if !b.TryAcquire(8) {
		t.Fatal("exp 8 of 10 free bytes to be taken")
	}
	if b.TryAcquire(4) {
		t.Fatal("exp 4 more to be refused")
	}
	done := make(chan struct{})
	go func() { _ = b.Acquire(context.Background(), 5); close(done) }()
	waitFor(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return b.waiters.Len() == 1 })
	if b.TryAcquire(1) {
		t.Fatal("TryAcquire took bytes while a waiter queued")
	}
	b.Release(8)
	<-done
}

// TestNeverOverSize runs many holders at once and checks that the bytes
// held never exceed the size.
func TestNeverOverSize(t *testing.T) {
	const size = 1000
	b := New(size)
	var held, peak atomic.Int64
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := int64(100 + i*13%400)
			for range 20 {
				if err := b.Acquire(context.Background(), n); err != nil {
					t.Error(err)
					return
				}
				h := held.Add(n)
				for {
					p := peak.Load()
					if h <= p || peak.CompareAndSwap(p, h) {
						break
					}
				}
				held.Add(-n)
				b.Release(n)
			}
		}()
	}
	wg.Wait()
	if peak.Load() > size {
		t.Fatalf("exp at most %d bytes held at once, got %d", size, peak.Load())
	}
	if peak.Load() == 0 || b.Used() != 0 {
		t.Fatalf("exp some bytes held and all given back: peak %d, used %d", peak.Load(), b.Used())
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// Spare bytes never take the second half: what waits for bytes finds them.
func TestTryAcquireSpareLeavesHalf(t *testing.T) {
	b := New(100)
	for b.TryAcquireSpare(10) {
	}
	if exp, got := int64(50), b.Used(); exp != got {
		t.Fatalf("spare bytes taken: exp %d, got %d", exp, got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := b.Acquire(ctx, 50); err != nil {
		t.Fatalf("exp the other half free for Acquire, got %v", err)
	}
}
