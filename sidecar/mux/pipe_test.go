package mux

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
	"time"
)

// pipePair is two PipeConns joined by two pipes.
func pipePair(t testing.TB) (*PipeConn, *PipeConn) {
	t.Helper()
	r1, w1, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r2, w2, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	return NewPipeConn(r1, w2), NewPipeConn(r2, w1)
}

// Streams over pipes: headers and bodies of every size around
// pipeCoalesce (one write up to it, header and payload apart above), more
// than a window each way, many streams at once.
func TestOverPipes(t *testing.T) {
	a, b := pipePair(t)
	c, s := Client(a, Config{}), Server(b, Config{MaxStreams: 1000})
	t.Cleanup(func() { c.Close(); s.Close() })
	go echo(s)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan string, 100)
	for _, n := range []int{0, 1, pipeCoalesce - 1, pipeCoalesce, pipeCoalesce + 1, MaxData, 3*Window + 123} {
		for i := 0; i < 5; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				body := make([]byte, n)
				_, _ = rand.Read(body)
				st, err := c.Open(ctx, []byte("p"), false)
				if err != nil {
					errs <- err.Error()
					return
				}
				defer st.Close()
				go func() { _, _ = st.WriteFinal(body) }()
				got, err := io.ReadAll(st)
				if err != nil || !bytes.Equal(got, append([]byte("re:p"), body...)) {
					errs <- fmt.Sprintf("a body of %d bytes came back as %d, %v", n, len(got), err)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	waitFor(t, func() bool { return streamCount(c) == 0 && streamCount(s) == 0 })
}

// A peer that never reads its pipe: writes fail within the write timeout
// (the pipe's deadline), never block for good.
func TestPipePeerThatDoesNotRead(t *testing.T) {
	a, _ := pipePair(t)
	c := Client(a, Config{WriteTimeout: 100 * time.Millisecond, KeepAlive: time.Hour})
	defer c.Close()
	start := time.Now()
	var err error
	for i := 0; i < 100000 && err == nil; i++ {
		var st *Stream
		st, err = c.Open(context.Background(), make([]byte, MaxOpenHeader), true)
		if st != nil {
			st.Close()
		}
	}
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("exp the writes to fail soon, got %v after %s", err, time.Since(start))
	}
}

// Calls back to back over pipes, from one caller and from several at
// once: nothing fails, is lost or reordered.
func TestPipeCallsBackToBack(t *testing.T) {
	for _, callers := range []int{1, 4} {
		a, b := pipePair(t)
		c, s := Client(a, Config{}), Server(b, Config{})
		t.Cleanup(func() { c.Close(); s.Close() })
		go echo(s)
		var wg sync.WaitGroup
		errs := make(chan string, callers)
		for k := 0; k < callers; k++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 300; i++ {
					h := []byte(fmt.Sprint("caller ", k, " call ", i))
					st, err := c.Open(context.Background(), h, true)
					if err != nil {
						errs <- err.Error()
						return
					}
					got, err := io.ReadAll(st)
					st.Close()
					if err != nil || string(got) != "re:"+string(h) {
						errs <- fmt.Sprintf("%s: %q, %v", h, got, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Fatalf("%d callers: %s", callers, e)
		}
	}
}
