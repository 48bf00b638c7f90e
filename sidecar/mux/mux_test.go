package mux

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// pair returns a client and a server Conn over a real socket pair.
func pair(t testing.TB, ccfg, scfg Config) (*Conn, *Conn) {
	t.Helper()
	a, b := socketPair(t)
	c, s := Client(a, ccfg), Server(b, scfg)
	t.Cleanup(func() { c.Close(); s.Close() })
	return c, s
}

func socketPair(t testing.TB) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("unix", "@patina-mux-test-"+randHex(t))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			ch <- nil
			return
		}
		ch <- c
	}()
	a, err := net.Dial("unix", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b := <-ch
	if b == nil {
		t.Fatal("accept failed")
	}
	return a, b
}

func randHex(t testing.TB) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return string(hexs(b))
}

func hexs(b []byte) []byte {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, x := range b {
		out = append(out, digits[x>>4], digits[x&15])
	}
	return out
}

// serveStreams runs handle on each stream s accepts, in a goroutine of its
// own, and closes the stream after, until s is closed.
func serveStreams(s *Conn, handle func(*Stream)) {
	for {
		st, err := s.Accept(context.Background())
		if err != nil {
			return
		}
		go func() {
			defer st.Close()
			handle(st)
		}()
	}
}

// echo serves streams: it answers each with "re:" + header + the body.
func echo(s *Conn) {
	serveStreams(s, func(st *Stream) {
		body, err := io.ReadAll(st)
		if err != nil {
			return
		}
		_, _ = st.WriteFinal(append(append([]byte("re:"), st.Header()...), body...))
	})
}

func TestRequestResponse(t *testing.T) {
	c, s := pair(t, Config{}, Config{})
	go echo(s)
	ctx := context.Background()
	st, err := c.Open(ctx, []byte("hello"), true)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(st)
	st.Close()
	if err != nil || string(got) != "re:hello" {
		t.Fatalf("exp re:hello, got %q %v", got, err)
	}
	// A body both ways, larger than the window: flow control must move it.
	big := make([]byte, 3*Window+123)
	_, _ = rand.Read(big)
	st, err = c.Open(ctx, []byte("big"), false)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_, _ = st.Write(big)
		_ = st.CloseWrite()
	}()
	got, err = io.ReadAll(st)
	st.Close()
	if err != nil || !bytes.Equal(got, append([]byte("re:big"), big...)) {
		t.Fatalf("big body: %d bytes, %v", len(got), err)
	}
	// Finished streams leave the tables.
	waitFor(t, func() bool { return streamCount(c) == 0 && streamCount(s) == 0 })
}

func streamCount(c *Conn) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.streams)
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A stream whose reader does not read holds at most InitialWindow bytes
// and does not stop other streams.
func TestSlowReaderDoesNotBlockOthers(t *testing.T) {
	c, s := pair(t, Config{}, Config{})
	ctx := context.Background()
	stalled := make(chan int, 1)
	go func() {
		for {
			st, err := s.Accept(ctx)
			if err != nil {
				return
			}
			if string(st.Header()) == "flood" {
				go func() {
					n, _ := st.Write(make([]byte, 10*Window)) // blocks once the window is used
					stalled <- n
				}()
				continue
			}
			go func() {
				defer st.Close()
				_, _ = st.WriteFinal([]byte("ok"))
			}()
		}
	}()
	flood, err := c.Open(ctx, []byte("flood"), true)
	if err != nil {
		t.Fatal(err)
	}
	defer flood.Close()
	waitFor(t, func() bool {
		flood.mu.Lock()
		defer flood.mu.Unlock()
		return flood.rlen == InitialWindow
	})
	for i := 0; i < 20; i++ {
		st, err := c.Open(ctx, []byte("quick"), true)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(st)
		st.Close()
		if err != nil || string(b) != "ok" {
			t.Fatalf("stream %d behind a stalled one: %q %v", i, b, err)
		}
	}
	select {
	case n := <-stalled:
		t.Fatalf("the flooding writer was not held by the window (wrote %d)", n)
	default:
	}
	flood.mu.Lock()
	if flood.rlen > InitialWindow {
		t.Fatalf("buffered %d bytes, more than the window", flood.rlen)
	}
	flood.mu.Unlock()
	// Closing the stalled stream resets it: the writer is released.
	flood.Close()
	select {
	case <-stalled:
	case <-time.After(5 * time.Second):
		t.Fatal("the writer of a reset stream stayed blocked")
	}
}

func TestResetAndDeadline(t *testing.T) {
	c, s := pair(t, Config{}, Config{})
	ctx := context.Background()
	got := make(chan error, 1)
	go func() {
		st, err := s.Accept(ctx)
		if err != nil {
			got <- err
			return
		}
		_, err = io.ReadAll(st)
		got <- err
	}()
	st, err := c.Open(ctx, []byte("x"), false)
	if err != nil {
		t.Fatal(err)
	}
	_ = st.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := st.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("exp a deadline error, got %v", err)
	}
	st.Reset("gave up")
	select {
	case err := <-got:
		var re *ResetError
		if !errors.As(err, &re) || !re.Remote || re.Reason != "gave up" {
			t.Fatalf("exp a remote reset with the reason, got %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the peer did not see the reset")
	}
}

func TestTooManyStreams(t *testing.T) {
	c, s := pair(t, Config{}, Config{MaxStreams: 2})
	ctx := context.Background()
	var held []*Stream
	go func() {
		for {
			st, err := s.Accept(ctx)
			if err != nil {
				return
			}
			held = append(held, st) // never answered
		}
	}()
	var streams []*Stream
	for i := 0; i < 3; i++ {
		st, err := c.Open(ctx, []byte("x"), true)
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, st)
	}
	_ = streams[2].SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := streams[2].Read(make([]byte, 1)); !errors.Is(err, ErrReset) {
		t.Fatalf("exp the third stream reset, got %v", err)
	}
	if c.Err() != nil {
		t.Fatalf("the connection must survive: %v", c.Err())
	}
}

// rawPeer is a hand-driven peer speaking (or breaking) the protocol.
func rawPeer(t *testing.T, cfg Config) (*Conn, net.Conn) {
	t.Helper()
	a, b := socketPair(t)
	c := Client(a, cfg)
	t.Cleanup(func() { c.Close(); b.Close() })
	return c, b
}

func frameBytes(typ, flags byte, id uint32, payload []byte) []byte {
	var buf bytes.Buffer
	_ = writeFrameTo(&buf, typ, flags, id, payload)
	return buf.Bytes()
}

func TestProtocolViolationsCloseTheConnection(t *testing.T) {
	cases := map[string][]byte{
		"oversized data":       frameBytes(typeData, 0, 1, make([]byte, MaxData+1)),
		"unknown type":         frameBytes(99, 0, 1, nil),
		"reserved bytes":       append([]byte{typePing, 0, 1, 0}, make([]byte, 8)...),
		"client id from peer":  frameBytes(typeOpen, 0, 1, []byte("x")),
		"short credit":         frameBytes(typeCredit, 0, 1, []byte{1}),
		"unknown flags":        frameBytes(typeData, 0x80, 1, nil),
		"huge length":          {typeData, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff},
		"oversized reset":      frameBytes(typeReset, 0, 1, make([]byte, maxReason+1)),
		"goaway":               frameBytes(typeGoAway, 0, 0, []byte("bye")),
		"ping of wrong length": frameBytes(typePing, 0, 0, []byte{1}),
	}
	for name, raw := range cases {
		t.Run(name, func(t *testing.T) {
			c, peer := rawPeer(t, Config{})
			if _, err := c.Open(context.Background(), []byte("x"), true); err != nil {
				t.Fatal(err)
			}
			go func() { _, _ = io.Copy(io.Discard, peer) }()
			_, _ = peer.Write(raw)
			select {
			case <-c.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("the connection survived a protocol violation")
			}
		})
	}
}

// A peer that sends more than the window on a stream loses the connection;
// before that, nothing beyond the window is buffered.
func TestDataBeyondWindow(t *testing.T) {
	c, peer := rawPeer(t, Config{})
	st, err := c.Open(context.Background(), []byte("x"), true)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, peer) }()
	chunk := make([]byte, InitialWindow+1)
	for sent := 0; sent <= Window; sent += len(chunk) {
		if _, err := peer.Write(frameBytes(typeData, 0, st.ID(), chunk)); err != nil {
			break
		}
	}
	select {
	case <-c.Done():
		if !errors.Is(c.Err(), ErrProtocol) {
			t.Fatalf("exp a protocol error, got %v", c.Err())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the connection survived data beyond the window")
	}
}

// A silent peer (never answers pings) loses the connection after twice the
// keep-alive; a stream's reader gets the error instead of waiting forever.
func TestSilentPeer(t *testing.T) {
	c, peer := rawPeer(t, Config{KeepAlive: 50 * time.Millisecond})
	go func() { _, _ = io.Copy(io.Discard, peer) }()
	st, err := c.Open(context.Background(), []byte("x"), true)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := st.Read(make([]byte, 1))
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("exp ErrClosed, got %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a reader waited on a silent peer")
	}
}

// A peer that stops reading cannot block a writer longer than WriteTimeout.
func TestPeerThatDoesNotRead(t *testing.T) {
	c, peer := rawPeer(t, Config{WriteTimeout: 100 * time.Millisecond, KeepAlive: time.Hour})
	_ = peer // never read
	ctx := context.Background()
	start := time.Now()
	var err error
	for i := 0; i < 100000 && err == nil; i++ {
		var st *Stream
		st, err = c.Open(ctx, make([]byte, MaxOpenHeader), true)
		if st != nil {
			st.Close()
		}
	}
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("exp the writes to fail soon, got %v after %s", err, time.Since(start))
	}
}

func TestConcurrentStreams(t *testing.T) {
	c, s := pair(t, Config{}, Config{MaxStreams: 1000})
	go echo(s)
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := make([]byte, 1000+i*97)
			binary.BigEndian.PutUint32(body, uint32(i))
			st, err := c.Open(context.Background(), []byte("c"), false)
			if err != nil {
				errs <- err
				return
			}
			defer st.Close()
			go func() { _, _ = st.WriteFinal(body) }()
			got, err := io.ReadAll(st)
			if err != nil || !bytes.Equal(got, append([]byte("re:c"), body...)) {
				errs <- fmt.Errorf("stream %d: wrong echo: %d bytes (want %d), %v", i, len(got), len(body)+4, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// The server refuses streams when told to accept none.
func TestNoPeerStreams(t *testing.T) {
	c, s := pair(t, Config{MaxStreams: -1}, Config{})
	st, err := s.Open(context.Background(), []byte("agent-opened"), true)
	if err != nil {
		t.Fatal(err)
	}
	_ = st.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := st.Read(make([]byte, 1)); !errors.Is(err, ErrReset) {
		t.Fatalf("exp reset, got %v", err)
	}
	_ = c
}

// FuzzReadLoop feeds arbitrary bytes as a peer: the connection must neither
// panic nor hang, and must close or stay consistent.
func FuzzReadLoop(f *testing.F) {
	f.Add(frameBytes(typePing, 0, 0, make([]byte, 8)))
	f.Add(append(frameBytes(typeOpen, flagFIN, 2, []byte("h")), frameBytes(typeData, flagFIN, 2, []byte("d"))...))
	f.Add(frameBytes(typeCredit, 0, 1, []byte{0, 0, 0, 1}))
	f.Add(frameBytes(typeReset, 0, 1, []byte("r")))
	f.Fuzz(func(t *testing.T, raw []byte) {
		a, b := net.Pipe()
		c := Client(a, Config{KeepAlive: time.Hour, WriteTimeout: 50 * time.Millisecond})
		go func() { _, _ = io.Copy(io.Discard, b) }()
		st, _ := c.Open(context.Background(), []byte("x"), true)
		_, _ = b.Write(raw)
		if st != nil {
			_ = st.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
			_, _ = io.ReadAll(st)
		}
		c.Close()
		b.Close()
	})
}

func BenchmarkRoundTrip(b *testing.B) {
	c, s := pair(b, Config{}, Config{})
	go echo(s)
	ctx := context.Background()
	buf := make([]byte, 512)
	b.ReportAllocs()
	for b.Loop() {
		st, err := c.Open(ctx, []byte(`{"m":"exec","a":{"command":"true"}}`), true)
		if err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := st.Read(buf); err != nil {
				break
			}
		}
		st.Close()
	}
}

// BenchmarkStream sends 16 MiB down one stream in writes of each size:
// whole frames, and a command's small lines.
func BenchmarkStream(b *testing.B) {
	for _, size := range []int{MaxData, 256} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			c, s := pair(b, Config{}, Config{})
			const total = 16 << 20
			chunk := make([]byte, size)
			go serveStreams(s, func(st *Stream) {
				for sent := 0; sent < total; sent += size {
					if _, err := st.Write(chunk); err != nil {
						return
					}
				}
				_ = st.CloseWrite()
			})
			ctx := context.Background()
			buf := make([]byte, 32<<10)
			b.SetBytes(total)
			for b.Loop() {
				st, err := c.Open(ctx, []byte("stream"), true)
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{st}, buf)
				if err != nil || n != total {
					b.Fatalf("read %d bytes of %d: %v", n, total, err)
				}
				st.Close()
			}
		})
	}
}
