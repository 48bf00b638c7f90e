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
	"sync/atomic"
	"time"

	"github.com/patina-dev/patina/worktree"
)

// eventLog appends a workspace's events (created, command run, committed,
// merged ...) to its log in the background, batching them: a command must
// not wait for a git note update. Events beyond the queue are counted and
// the count is logged instead of them.
type eventLog struct {
	sink    logSink
	redact  func(string) string
	log     *slog.Logger
	ch      chan worktree.Event
	sync    chan chan struct{}
	quit    chan struct{}
	stopped chan struct{}
	once    sync.Once
	dropped atomic.Int64
}

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
		ch:      make(chan worktree.Event, 4096),
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
	select {
	case l.ch <- ev:
	default:
		l.dropped.Add(1)
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
		ch := l.ch
		if hold != nil {
			ch = nil
		}
		select {
		case ev := <-ch:
			l.write(append([]worktree.Event{ev}, l.drain(512)...))
			hold = time.After(minInterval)
		case <-hold:
			hold = nil
		case reply := <-l.sync:
			l.write(l.drain(-1))
			close(reply)
		case <-l.quit:
			l.write(l.drain(-1))
			return
		}
	}
}

// drain takes up to max queued events (all if max < 0) without waiting.
func (l *eventLog) drain(max int) []worktree.Event {
	var evs []worktree.Event
	for max < 0 || len(evs) < max {
		select {
		case ev := <-l.ch:
			evs = append(evs, ev)
		default:
			return evs
		}
	}
	return evs
}

func (l *eventLog) write(evs []worktree.Event) {
	if n := l.dropped.Swap(0); n > 0 {
		evs = append(evs, worktree.Event{Time: time.Now().UTC(), Kind: "dropped", Message: fmt.Sprintf("%d events not logged: the log queue was full", n)})
	}
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
