package mux

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"
)

// countingBudget is a budget of n bytes that records its peak use.
type countingBudget struct {
	mu         sync.Mutex
	size, used int64
	peak       int64
}

func (b *countingBudget) TryAcquireSpare(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.size {
		return false
	}
	b.used += n
	b.peak = max(b.peak, b.used)
	return true
}

func (b *countingBudget) Release(n int64) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

func (b *countingBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// readAll opens a stream over a pair whose client draws its windows from b,
// has the server send size bytes on it and checks that every one arrives.
// The caller closes the stream it returns.
func readAll(t *testing.T, b *countingBudget, size int64) *Stream {
	t.Helper()
	c, s := pair(t, Config{Budget: b}, Config{})
	ctx := context.Background()
	go func() {
		st, err := s.Accept(ctx)
		if err != nil {
			return
		}
		defer st.Close()
		_, _ = st.WriteFinal(make([]byte, size))
	}()
	st, err := c.Open(ctx, []byte("big"), true)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, st)
	if err != nil || n != size {
		st.Close()
		t.Fatalf("exp %d bytes, got %d (%v)", size, n, err)
	}
	return st
}

// A stream that is read grows its window from the budget up to Window,
// gives it back when it ends, and carries every byte.
func TestWindowGrowsFromBudget(t *testing.T) {
	b := &countingBudget{size: 1 << 30}
	st := readAll(t, b, 4<<20)
	st.Close()
	if exp, got := int64(Window-InitialWindow), b.peak; exp != got {
		t.Fatalf("window grown from the budget: exp %d, got %d", exp, got)
	}
	// Given back when the stream is forgotten, which the connection's
	// reader may do a moment after the last Read (a leak stays).
	deadline := time.Now().Add(2 * time.Second)
	for b.inUse() != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := b.inUse(); got != 0 {
		t.Fatalf("exp the window given back once the stream ended, %d bytes still taken", got)
	}
}

// With the budget spent, a stream still works at InitialWindow.
func TestWindowStaysSmallWhenBudgetSpent(t *testing.T) {
	b := &countingBudget{size: 0}
	st := readAll(t, b, 1<<20)
	defer st.Close()
	st.mu.Lock()
	limit := st.recvLimit
	st.mu.Unlock()
	if limit != InitialWindow {
		t.Fatalf("exp the window to stay at %d with no budget, got %d", InitialWindow, limit)
	}
}

// Closing the connection gives back what its streams' windows grew by.
func TestWindowReleasedWhenConnectionCloses(t *testing.T) {
	b := &countingBudget{size: 1 << 30}
	c, s := pair(t, Config{Budget: b}, Config{})
	ctx := context.Background()
	release := make(chan struct{})
	go func() {
		st, err := s.Accept(ctx)
		if err != nil {
			return
		}
		_, _ = st.Write(make([]byte, 1<<20))
		<-release
	}()
	defer close(release)
	st, err := c.Open(ctx, []byte("big"), true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(st, make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if b.inUse() == 0 {
		t.Fatal("exp the window to have grown from the budget")
	}
	c.Close()
	// The peer's answer to the close can fail the connection first, from
	// its reader: Close then returns while that release is under way.
	waitFor(t, func() bool { return b.inUse() == 0 })
}
