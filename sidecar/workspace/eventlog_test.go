package workspace

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/patina-dev/patina/worktree"
)

func TestFileSinkStaysBounded(t *testing.T) {
	f := fileSink{path: filepath.Join(t.TempDir(), "log.jsonl"), max: 16 << 10}
	ctx := context.Background()
	for i := 0; i < 2000; i++ {
		if err := f.append(ctx, []worktree.Event{{Kind: "command", Message: fmt.Sprintf("echo %d", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(f.path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > 16<<10 {
		t.Fatalf("exp the log within 16 KiB, got %d bytes", fi.Size())
	}
	evs, err := f.read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if exp, got := "trimmed", evs[0].Kind; exp != got {
		t.Fatalf("exp the first event to say what was dropped, got %q", got)
	}
	if exp, got := "echo 1999", evs[len(evs)-1].Message; exp != got {
		t.Fatalf("exp the newest event kept: exp %q, got %q", exp, got)
	}
}

// gateSink records what is appended; while gate is open (not nil), each
// append says so on entered and waits for gate.
type gateSink struct {
	mu      sync.Mutex
	got     []worktree.Event
	entered chan struct{}
	gate    chan struct{}
}

func (g *gateSink) append(_ context.Context, evs []worktree.Event) error {
	if g.gate != nil {
		g.entered <- struct{}{}
		<-g.gate
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.got = append(g.got, evs...)
	return nil
}

func (g *gateSink) read(context.Context) ([]worktree.Event, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.got), nil
}

func TestEventLogKeepsOrder(t *testing.T) {
	sink := &gateSink{}
	l := newEventLog(sink, slog.New(slog.DiscardHandler), nil)
	defer l.close()
	for i := range 1500 {
		l.add(worktree.Event{Kind: "command", Message: fmt.Sprint(i)})
	}
	evs, err := l.read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if exp, got := 1500, len(evs); exp != got {
		t.Fatalf("exp %d events, got %d", exp, got)
	}
	for i, ev := range evs {
		if exp := fmt.Sprint(i); ev.Message != exp {
			t.Fatalf("event %d: exp %q, got %q", i, exp, ev.Message)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if cap(l.queue) != 0 {
		t.Fatalf("exp an empty queue to hold no buffer, got capacity %d", cap(l.queue))
	}
}

// A log whose writes are stuck keeps at most maxQueued events and then
// says how many it dropped.
func TestEventLogDropsBeyondQueue(t *testing.T) {
	sink := &gateSink{entered: make(chan struct{}), gate: make(chan struct{})}
	l := newEventLog(sink, slog.New(slog.DiscardHandler), nil)
	defer l.close()
	l.add(worktree.Event{Kind: "command", Message: "first"})
	<-sink.entered // the loop writes "first" and is stuck there
	for i := range maxQueued + 10 {
		l.add(worktree.Event{Kind: "command", Message: fmt.Sprint(i)})
	}
	close(sink.gate)
	go func() {
		for range sink.entered {
		}
	}()
	evs, err := l.read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if exp, got := 1+maxQueued+1, len(evs); exp != got {
		t.Fatalf("exp %d events, got %d", exp, got)
	}
	last := evs[len(evs)-1]
	if last.Kind != "dropped" || !strings.HasPrefix(last.Message, "10 events not logged") {
		t.Fatalf("exp a note of 10 dropped events last, got %+v", last)
	}
	if exp, got := fmt.Sprint(maxQueued-1), evs[len(evs)-2].Message; exp != got {
		t.Fatalf("exp the queue's last event kept: exp %q, got %q", exp, got)
	}
}

// A command of a megabyte is queued cut: a burst of them cannot hold
// megabytes each in the sidecar.
func TestEventLogCutsLongMessages(t *testing.T) {
	sink := &gateSink{entered: make(chan struct{}), gate: make(chan struct{})}
	l := newEventLog(sink, slog.New(slog.DiscardHandler), func(s string) string {
		return strings.ReplaceAll(s, "hunter2", "[redacted]")
	})
	defer l.close()
	l.add(worktree.Event{Kind: "command", Message: "first"})
	<-sink.entered
	long := strings.Repeat("x", maxQueuedMessage-3) + "hunter2" + strings.Repeat("y", 1<<20)
	l.add(worktree.Event{Kind: "command", Message: long})
	l.mu.Lock()
	got := l.queue[0].Message
	l.mu.Unlock()
	close(sink.gate)
	go func() {
		for range sink.entered {
		}
	}()
	if len(got) > maxQueuedMessage {
		t.Fatalf("exp the queued message cut to %d bytes, got %d", maxQueuedMessage, len(got))
	}
	if strings.Contains(got, "hun") {
		t.Fatalf("exp the secret redacted before the cut, got ...%q", got[len(got)-16:])
	}
}
