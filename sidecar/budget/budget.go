package budget

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
)

// DefaultSize is the budget of a sidecar that is told none (32 MiB).
const DefaultSize = 32 << 20

// ErrSpent: the budget stayed spent until the caller's deadline. It wraps
// the context's error.
var ErrSpent = errors.New("the sidecar's memory budget is spent")

// Budget is a weighted semaphore of bytes. The zero value is not usable:
// call New.
type Budget struct {
	size int64

	mu      sync.Mutex
	used    int64
	waiters list.List // of *waiter, in arrival order
}

type waiter struct {
	n     int64
	ready chan struct{} // closed once the bytes were granted
}

// New returns a budget of size bytes (DefaultSize if size ≤ 0).
func New(size int64) *Budget {
	if size <= 0 {
		size = DefaultSize
	}
	return &Budget{size: size}
}

// Size is the budget's size in bytes.
func (b *Budget) Size() int64 { return b.size }

// Used is how many bytes are taken now.
func (b *Budget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Clamp returns how much of n the budget can ever grant: n, or its whole
// size if n is larger. A caller asking for more than the size asks for
// Clamp(n) (and holds the whole budget while it works).
func (b *Budget) Clamp(n int64) int64 { return min(max(n, 0), b.size) }

// Acquire takes n bytes (at most the budget's size: see Clamp), waiting
// until they are free or ctx ends (ErrSpent wrapping ctx's error; nothing
// is taken then).
func (b *Budget) Acquire(ctx context.Context, n int64) error {
	n = b.Clamp(n)
	if n == 0 {
		return nil
	}
	b.mu.Lock()
	if b.waiters.Len() == 0 && b.used+n <= b.size {
		b.used += n
		b.mu.Unlock()
		return nil
	}
	w := &waiter{n: n, ready: make(chan struct{})}
	e := b.waiters.PushBack(w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		select {
		case <-w.ready:
			// Granted as ctx ended: give it back.
			b.used -= n
			b.grantLocked()
		default:
			front := b.waiters.Front() == e
			b.waiters.Remove(e)
			if front {
				b.grantLocked() // the waiters behind may fit now
			}
		}
		b.mu.Unlock()
		return fmt.Errorf("%w (%d bytes of %d were in use for too long): %w", ErrSpent, b.Used(), b.size, ctx.Err())
	}
}

// TryAcquire takes n bytes if they are free now and nobody waits.
func (b *Budget) TryAcquire(n int64) bool { return b.tryAcquire(n, b.size) }

// TryAcquireSpare takes n bytes if they are free now, nobody waits, and
// half of the budget stays free after: memory that is nice to have (a
// stream's larger window) and may be held for long, so that what must
// be had (an answer's output, which Acquire waits for) always finds room.
func (b *Budget) TryAcquireSpare(n int64) bool { return b.tryAcquire(n, b.size/2) }

func (b *Budget) tryAcquire(n, limit int64) bool {
	if n <= 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.waiters.Len() > 0 || b.used+n > limit {
		return false
	}
	b.used += n
	return true
}

// Release gives back n bytes taken by Acquire (the same n: Acquire clamps
// it, Release clamps it the same way) or TryAcquire.
func (b *Budget) Release(n int64) {
	n = b.Clamp(n)
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if b.used < 0 {
		panic("budget: released more than was acquired")
	}
	b.grantLocked()
}

// grantLocked wakes the waiters at the front whose bytes are free now, in
// order.
func (b *Budget) grantLocked() {
	for e := b.waiters.Front(); e != nil; e = b.waiters.Front() {
		w := e.Value.(*waiter)
		if b.used+w.n > b.size {
			return
		}
		b.used += w.n
		b.waiters.Remove(e)
		close(w.ready)
	}
}
