package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// readOutputResult reads the head (and tail, when larger) of an output file
// without reading the rest: a 1 GB output costs 2×limit bytes of memory.
func readOutputResult(path string, limit int) Output {
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		return Output{} // most commands write nothing to one stream
	}
	f, err := os.Open(path)
	if err != nil {
		return Output{}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Output{}
	}
	size := st.Size()
	if size <= int64(limit) {
		b := make([]byte, size)
		n, _ := io.ReadFull(f, b)
		return Output{Data: b[:n], Size: int64(n)}
	}
	head := make([]byte, limit)
	n, _ := f.ReadAt(head, 0)
	tailLen := size - int64(limit)
	if tailLen > int64(limit) {
		tailLen = int64(limit)
	}
	tail := make([]byte, tailLen)
	m, _ := f.ReadAt(tail, size-tailLen)
	return Output{Data: head[:n], Tail: tail[:m], Size: size, Truncated: true}
}

// outputPath checks that command id exists and returns its stream's file.
func (s *Session) outputPath(id string, stream Stream) (string, error) {
	if stream != Stdout && stream != Stderr {
		return "", fmt.Errorf("%w: unknown stream %q (want stdout or stderr)", ErrInvalid, stream)
	}
	ci, ok := s.hist.get(id)
	if !ok {
		return "", fmt.Errorf("command %s in session %s: %w", id, s.id, ErrNotFound)
	}
	p := filesFor(s.dir, id).stream(stream)
	size := ci.StdoutBytes
	if stream == Stderr {
		size = ci.StderrBytes
	}
	// A stream that stayed empty reads as empty even when its file is
	// gone; one with bytes whose file is gone was pruned.
	if _, err := os.Stat(p); err != nil && ci.State != CommandRunning && size > 0 {
		return "", fmt.Errorf("output of command %s in session %s: %w (deleted: only the last %d commands keep their output)", id, s.id, ErrNotFound, s.m.cfg.KeepOutputs)
	}
	return p, nil
}

// ReadOutput reads up to limit bytes of command id's stream from offset
// (byte-exact). It returns fewer bytes (maybe none) at the current end.
func (s *Session) ReadOutput(id string, stream Stream, offset int64, limit int) ([]byte, error) {
	if offset < 0 || limit < 0 {
		return nil, fmt.Errorf("read output: %w: negative offset or limit", ErrInvalid)
	}
	p, err := s.outputPath(id, stream)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil // not created yet by the shell
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, limit)
	n, err := f.ReadAt(b, offset)
	if err != nil && err != io.EOF {
		return nil, err
	}
	return b[:n], nil
}

// Follow streams command id's stream from offset as it is written, until
// the command finishes (then the rest, then io.EOF), ctx ends, or the
// returned reader is closed. It wakes on inotify events, so output arrives
// within microseconds of being written, with no polling interval.
func (s *Session) Follow(ctx context.Context, id string, stream Stream, offset int64) (io.ReadCloser, error) {
	if offset < 0 {
		return nil, fmt.Errorf("follow: %w: negative offset", ErrInvalid)
	}
	p, err := s.outputPath(id, stream)
	if err != nil {
		return nil, err
	}
	w, err := s.m.watches.subscribe(p)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	var done <-chan struct{}
	if s.cur != nil && s.cur.id == id {
		done = s.cur.done
	} else {
		closed := make(chan struct{})
		close(closed)
		done = closed
	}
	s.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	return &follower{ctx: ctx, cancel: cancel, path: p, off: offset, w: w, done: done, gone: s.gone}, nil
}

type follower struct {
	ctx    context.Context
	cancel context.CancelFunc
	path   string
	f      *os.File
	off    int64
	w      *watch
	done   <-chan struct{}
	gone   <-chan struct{}
	final  bool // the command finished: read to the end, then EOF
}

func (r *follower) Read(p []byte) (int, error) {
	for {
		if r.f == nil {
			f, err := os.Open(r.path)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return 0, err
			}
			r.f = f
		}
		if r.f != nil {
			n, err := r.f.ReadAt(p, r.off)
			if n > 0 {
				r.off += int64(n)
				return n, nil
			}
			if err != nil && err != io.EOF {
				return 0, err
			}
		}
		if r.final {
			return 0, io.EOF
		}
		select {
		case <-r.w.events:
		case <-r.done:
			r.final = true
		case <-r.gone:
			r.final = true
		case <-r.ctx.Done():
			return 0, r.ctx.Err()
		}
	}
}

func (r *follower) Close() error {
	r.cancel()
	r.w.close()
	if r.f != nil {
		return r.f.Close()
	}
	return nil
}

// watchHub is one inotify instance shared by every follower of a Manager
// (the kernel allows few instances per user, 128 by default).
type watchHub struct {
	init sync.Once
	err  error
	f    *os.File
	fd   int

	mu   sync.Mutex
	wds  map[int32]string           // watch descriptor -> directory
	dirs map[string]int32           // directory -> watch descriptor
	subs map[string]map[*watch]bool // file path -> subscribers
}

// watch is one subscription: events gets a token when its file is created
// or written.
type watch struct {
	hub    *watchHub
	path   string
	events chan struct{}
}

func (w *watch) close() {
	h := w.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs[w.path], w)
	if len(h.subs[w.path]) == 0 {
		delete(h.subs, w.path)
	}
}

func (h *watchHub) close() {
	if h.f != nil {
		h.f.Close()
	}
}
