package pollread

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

func pipe(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// readAsync reads once in a goroutine.
func readAsync(rd io.Reader) chan string {
	ch := make(chan string, 1)
	go func() {
		b := make([]byte, 64)
		n, err := rd.Read(b)
		if err != nil {
			ch <- "error: " + err.Error()
			return
		}
		ch <- string(b[:n])
	}()
	return ch
}

// eventually waits up to 5 s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal(what)
		}
	}
}

func want(t *testing.T, ch chan string, s string) {
	t.Helper()
	select {
	case got := <-ch:
		if got != s {
			t.Fatalf("read %q, want %q", got, s)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no read within 5 s (want %q)", s)
	}
}

// A read that waits in the poller when Expect comes is woken, polls, and
// gets the reply written while it polls; without Expect it reads as
// os.File does.
func TestExpectWakesAWaitingRead(t *testing.T) {
	r, w := pipe(t)
	var g Gate
	rd := New(r, &g)

	ch := readAsync(rd)
	time.Sleep(20 * time.Millisecond) // the read waits in the poller
	g.Begin()
	rd.Expect(time.Second)
	eventually(t, "the reader does not poll after Expect", func() bool { return g.busy.Load() == 1 })
	if _, err := w.Write([]byte("done 1\n")); err != nil {
		t.Fatal(err)
	}
	want(t, ch, "done 1\n")
	g.End()
	eventually(t, "the gate stays taken after the poll", func() bool { return g.busy.Load() == 0 })

	waitsPlainly(t, &g, readAsync(rd), w, "later\n") // no Expect
}

// waitsPlainly checks that a read (ch) does not poll, then that it gets s
// written to w.
func waitsPlainly(t *testing.T, g *Gate, ch chan string, w *os.File, s string) {
	t.Helper()
	time.Sleep(20 * time.Millisecond)
	if g.busy.Load() != 0 {
		t.Fatal("the reader polls")
	}
	if _, err := w.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	want(t, ch, s)
}

// When the poll's time is over, the read goes back to the poller and still
// gets what comes later; EOF ends it as os.File's read does.
func TestPollEndsThenWaits(t *testing.T) {
	r, w := pipe(t)
	var g Gate
	rd := New(r, &g)
	g.Begin()
	rd.Expect(2 * time.Millisecond)
	ch := readAsync(rd)
	time.Sleep(10 * time.Millisecond)
	eventually(t, "still polling after its time", func() bool { return g.busy.Load() == 0 })
	if g.Polls() != 1 {
		t.Fatalf("%d polls, want 1", g.Polls())
	}
	w.Write([]byte("x"))
	want(t, ch, "x")
	g.End()

	g.Begin()
	rd.Expect(time.Second)
	ch = readAsync(rd)
	w.Close()
	want(t, ch, "error: EOF")
	g.End()
}

// While another operation of the gate is in flight, Expect does not poll:
// a busy process spends its CPU on the work.
func TestGateBusyDoesNotPoll(t *testing.T) {
	r, w := pipe(t)
	var g Gate
	rd := New(r, &g)
	g.Begin()
	g.Begin()
	rd.Expect(time.Second)
	waitsPlainly(t, &g, readAsync(rd), w, "y")
}

// An Expect made while no Read waits is not lost: the next Read polls.
func TestExpectBeforeReadPolls(t *testing.T) {
	r, w := pipe(t)
	var g Gate
	rd := New(r, &g)
	g.Begin()
	defer g.End()
	rd.Expect(time.Second)
	ch := readAsync(rd)
	eventually(t, "the read does not poll", func() bool { return g.busy.Load() == 1 })
	w.Write([]byte("z"))
	want(t, ch, "z")
	if g.Polls() != 1 {
		t.Fatalf("%d polls, want 1", g.Polls())
	}
}

// Expects that race with reads (one per reply, from other goroutines, as
// a server answering calls concurrently makes them) never fail a read nor
// lose or reorder a byte.
func TestConcurrentExpectsNeverFailARead(t *testing.T) {
	r, w := pipe(t)
	var g Gate
	rd := New(r, &g)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
					rd.Expect(50 * time.Microsecond)
				}
			}
		}()
	}
	const n = 20000
	go func() {
		for i := 0; i < n; i++ {
			if _, err := fmt.Fprintf(w, "%d\n", i); err != nil {
				return
			}
			if i%100 == 0 {
				time.Sleep(100 * time.Microsecond)
			}
		}
	}()
	br := bufio.NewReader(rd)
	for i := 0; i < n; i++ {
		line, err := br.ReadString('\n')
		if err != nil || line != fmt.Sprintf("%d\n", i) {
			close(stop)
			t.Fatalf("line %d: %q, %v", i, line, err)
		}
	}
	close(stop)
	wg.Wait()
	if g.Polls() == 0 {
		t.Fatal("no read polled")
	}
}

// A deadline set through the Reader fails the read when it is due, with
// or without Expect's wake-ups (told apart from it), once any poll is over.
func TestUserDeadline(t *testing.T) {
	for _, expect := range []time.Duration{0, 5 * time.Millisecond} {
		r, _ := pipe(t)
		var g Gate
		rd := New(r, &g)
		if err := rd.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		rd.Expect(expect)
		start := time.Now()
		_, err := rd.Read(make([]byte, 8))
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Expect(%s): read: %v, want a deadline error", expect, err)
		}
		if d := time.Since(start); d < 40*time.Millisecond {
			t.Fatalf("Expect(%s): the deadline fired after %s, before it was due", expect, d)
		}
	}
}

// Closing the file while a read polls ends both within the poll's time.
func TestCloseWhilePolling(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	var g Gate
	rd := New(pr, &g)
	rd.Expect(200 * time.Millisecond)
	ch := readAsync(rd)
	eventually(t, "the read does not poll", func() bool { return g.busy.Load() == 1 })
	start := time.Now()
	if err := pr.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-ch:
		if !strings.HasPrefix(got, "error: ") {
			t.Fatalf("read after close: %q", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the read did not end after close")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("close and read took %s", d)
	}
}

// A file in blocking mode is read plainly: Expect does nothing.
func TestBlockingFileIsReadPlainly(t *testing.T) {
	r, w := pipe(t)
	_ = r.Fd() // puts r in blocking mode
	var g Gate
	rd := New(r, &g)
	rd.Expect(time.Second)
	ch := readAsync(rd)
	waitsPlainly(t, &g, ch, w, "b")
}
