package pollread

import (
	"errors"
	"io"
	"os"
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

// A deadline of the reader's own still fails the read (Expect's wake-up
// is told apart from it).
func TestOwnDeadlineStillFails(t *testing.T) {
	r, _ := pipe(t)
	var g Gate
	rd := New(r, &g)
	if err := r.SetReadDeadline(time.Now().Add(10 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	_, err := rd.Read(make([]byte, 8))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read: %v, want a deadline error", err)
	}
}
