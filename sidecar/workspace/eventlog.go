package workspace

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/patina-dev/patina/worktree"
)

// eventLog appends a workspace's events (created, command run, committed,
// merged ...) to its log in the background, batching them: a command must
// not wait for a git note update. Events beyond the queue (maxQueued) are
// counted and the count is logged instead of them. The queue is a slice
// that holds only what waits: an idle workspace's log costs the sidecar a
// few hundred bytes, not a preallocated buffer (a channel of 4,096 events
// took 256 KiB per workspace, 256 MB for 1,000 of them).
type eventLog struct {
	sink    logSink
	redact  func(string) string
	log     *slog.Logger
	wake    chan struct{} // one token: the queue has events
	sync    chan chan struct{}
	quit    chan struct{}
	stopped chan struct{}
	once    sync.Once

	mu      sync.Mutex
	queue   []worktree.Event // at most maxQueued
	dropped int64
}

// maxQueued bounds the events waiting to be written.
const maxQueued = 4096

// maxQueuedMessage bounds a queued event's message (a command's text can be
// megabytes): the queue holds at most maxQueued × maxQueuedMessage.
const maxQueuedMessage = 4 << 10

// maxBatch bounds the events one write takes under a burst.
const maxBatch = 512

// minInterval spaces a workspace's log writes under load.
const minInterval = 200 * time.Millisecond

// logSink stores a workspace's events: the repository's log note, or a
// file for a scratch workspace.
type logSink interface {
	append(ctx context.Context, evs []worktree.Event) error
	read(ctx context.Context) ([]worktree.Event, error)
}

func newEventLog(sink logSink, logger *slog.Logger, redact func(string) string) *eventLog {
	l := &eventLog{
		sink:    sink,
		redact:  redact,
		log:     logger,
		wake:    make(chan struct{}, 1),
		sync:    make(chan chan struct{}),
		quit:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	go l.loop()
	return l
}

// add queues an event (never blocks), without a secret value in it.
func (l *eventLog) add(ev worktree.Event) {
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	if l.redact != nil {
		ev.Message = l.redact(ev.Message)
	}
	if len(ev.Message) > maxQueuedMessage {
		// The log keeps less of it (worktree cuts a message to one line of
		// 2 KiB); cut after redacting, so no part of a secret is left.
		ev.Message = ev.Message[:maxQueuedMessage]
	}
	l.mu.Lock()
	if len(l.queue) < maxQueued {
		l.queue = append(l.queue, ev)
	} else {
		l.dropped++
	}
	l.mu.Unlock()
	l.signal()
}

// signal wakes the loop (never blocks).
func (l *eventLog) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// flush waits until every queued event is written.
func (l *eventLog) flush(ctx context.Context) {
	reply := make(chan struct{})
	select {
	case l.sync <- reply:
		select {
		case <-reply:
		case <-ctx.Done():
		}
	case <-l.stopped:
	case <-ctx.Done():
	}
}

// read flushes and returns the log.
func (l *eventLog) read(ctx context.Context) ([]worktree.Event, error) {
	l.flush(ctx)
	return l.sink.read(ctx)
}

func (l *eventLog) close() {
	l.once.Do(func() { close(l.quit) })
	<-l.stopped
}

func (l *eventLog) loop() {
	defer close(l.stopped)
	// A note update costs a few git processes: under a burst of commands,
	// write at most every minInterval (hold), though flush and quit do not
	// wait.
	var hold <-chan time.Time
	for {
		wake := l.wake
		if hold != nil {
			wake = nil
		}
		select {
		case <-wake:
			if evs := l.take(maxBatch); len(evs) > 0 {
				l.write(evs)
				hold = time.After(minInterval)
			}
		case <-hold:
			// What came or was left during the hold is taken next.
			hold = nil
			l.signal()
		case reply := <-l.sync:
			l.write(l.take(-1))
			close(reply)
		case <-l.quit:
			l.write(l.take(-1))
			return
		}
	}
}

// take removes up to max queued events (all if max < 0) and, once the
// queue is empty, a note of how many were dropped.
func (l *eventLog) take(max int) []worktree.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var evs []worktree.Event
	if max < 0 || len(l.queue) <= max {
		evs, l.queue = l.queue, nil
	} else {
		// evs's capacity ends at max: what add appends cannot reach it.
		evs, l.queue = l.queue[:max:max], l.queue[max:]
	}
	if len(l.queue) == 0 && l.dropped > 0 {
		evs = append(evs, worktree.Event{Time: time.Now().UTC(), Kind: "dropped", Message: fmt.Sprintf("%d events not logged: the log queue was full", l.dropped)})
		l.dropped = 0
	}
	return evs
}

func (l *eventLog) write(evs []worktree.Event) {
	if len(evs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), eventWriteTimeout)
	defer cancel()
	if err := l.sink.append(ctx, evs); err != nil {
		l.log.Warn("append to workspace log", "events", len(evs), "err", err)
	}
}

// noteSink is a repository workspace's log note (refs/notes/patina-log).
type noteSink struct {
	repo *worktree.Repo
	id   string
}

func (n noteSink) append(ctx context.Context, evs []worktree.Event) error {
	return n.repo.AppendLog(ctx, n.id, evs...)
}

func (n noteSink) read(ctx context.Context) ([]worktree.Event, error) { return n.repo.Log(ctx, n.id) }

// fileSink is a scratch workspace's log: JSON lines in its directory.
type fileSink struct {
	path string
	// max bounds the file (maxFileLog when 0): past it, the older half is
	// dropped.
	max int64
}

// maxFileLog bounds a scratch workspace's log on the host.
const maxFileLog = 4 << 20

func (f fileSink) append(_ context.Context, evs []worktree.Event) error {
	fh, err := os.OpenFile(f.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(fh)
	for _, ev := range evs {
		if err := enc.Encode(ev); err != nil {
			fh.Close()
			return err
		}
	}
	fi, err := fh.Stat()
	fh.Close()
	if err != nil {
		return err
	}
	if max := cmp.Or(f.max, maxFileLog); fi.Size() > max {
		return f.trim(max)
	}
	return nil
}

// trim keeps the newest half of the log, whole lines, after a line that
// says how many events were dropped.
func (f fileSink) trim(max int64) error {
	b, err := os.ReadFile(f.path)
	if err != nil {
		return err
	}
	cut := len(b) - int(max/2)
	if i := bytes.IndexByte(b[cut:], '\n'); i >= 0 {
		cut += i + 1
	} else {
		cut = len(b)
	}
	head, err := json.Marshal(worktree.Event{Time: time.Now().UTC(), Kind: "trimmed",
		Message: fmt.Sprintf("%d earlier events dropped: the log keeps its newest %d KiB", bytes.Count(b[:cut], []byte("\n")), max>>10)})
	if err != nil {
		return err
	}
	return writeFileAtomic(f.path, append(append(head, '\n'), b[cut:]...), 0o644)
}

func (f fileSink) read(context.Context) ([]worktree.Event, error) {
	fh, err := os.Open(f.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	var evs []worktree.Event
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var ev worktree.Event
		if json.Unmarshal(sc.Bytes(), &ev) == nil {
			evs = append(evs, ev)
		}
	}
	return evs, sc.Err()
}
