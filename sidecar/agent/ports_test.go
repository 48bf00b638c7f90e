package agent

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/sidecar/agent/wire"
	"github.com/patina-dev/patina/sidecar/mux"
)

// A tunnel carries bytes both ways, byte for byte (all 256 values), passes
// on a half-close in each direction, and a port nobody listens on is
// ErrNotListening at once.
func TestDialPort(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// An echo server that says "bye" after its client half-closed.
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				io.Copy(nc, nc)
				nc.Write([]byte("bye"))
			}()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port

	tun, err := f.client.DialPort(ctx, port)
	if err != nil {
		t.Fatal(err)
	}
	defer tun.Close()
	payload := make([]byte, 3<<20) // more than the mux window, both ways
	rand.Read(payload)
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(tun)
		got <- b
	}()
	if _, err := tun.Write(payload); err != nil {
		t.Fatal(err)
	}
	if err := tun.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	select {
	case b := <-got:
		if !bytes.Equal(b, append(payload, "bye"...)) {
			t.Fatalf("exp the payload echoed then bye (%d bytes), got %d bytes", len(payload)+3, len(b))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the tunnel did not carry the echo and the half-close")
	}

	// Nothing listens.
	ln2, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := ln2.Addr().(*net.TCPAddr).Port
	ln2.Close()
	start := time.Now()
	if _, err := f.client.DialPort(ctx, closed); !errors.Is(err, wire.ErrNotListening) {
		t.Fatalf("exp ErrNotListening, got %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("a refused port took %s", d)
	}
	for _, p := range []int{0, -1, 65536} {
		if _, err := f.client.DialPort(ctx, p); !errors.Is(err, session.ErrInvalid) {
			t.Errorf("port %d: exp invalid, got %v", p, err)
		}
	}

	// Many tunnels at once on one connection, each its own bytes.
	const n = 50
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			tun, err := f.client.DialPort(ctx, port)
			if err != nil {
				errs <- err
				return
			}
			defer tun.Close()
			msg := []byte{byte(i), 'x', byte(i)}
			tun.Write(msg)
			tun.CloseWrite()
			b, _ := io.ReadAll(bufio.NewReader(tun))
			if !bytes.Equal(b, append(msg, "bye"...)) {
				errs <- errors.New("a tunnel got another's bytes: " + string(b))
				return
			}
			errs <- nil
		}()
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// A hostile agent that answers a dial with junk, or never answers, costs
// the caller a bounded error.
func TestDialPortHostileAgent(t *testing.T) {
	for name, reply := range map[string]func(st *mux.Stream){
		"junk": func(st *mux.Stream) { st.WriteFinal([]byte("\x00junk\n")) },
		"long address": func(st *mux.Stream) {
			wire.WriteHead(st, wire.PortDialResult{Addr: string(bytes.Repeat([]byte("a"), 100))})
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := fakeAgent(t, reply)
			if _, err := c.DialPort(context.Background(), 80); !errors.Is(err, ErrUnavailable) {
				t.Fatalf("exp unavailable, got %v", err)
			}
		})
	}
	if testing.Short() {
		return
	}
	t.Run("silent", func(t *testing.T) {
		c := fakeAgent(t, func(st *mux.Stream) { <-st.Done() })
		start := time.Now()
		if _, err := c.DialPort(context.Background(), 80); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("exp unavailable, got %v", err)
		}
		if d := time.Since(start); d > portAck+5*time.Second {
			t.Fatalf("a silent agent held a dial for %s", d)
		}
	})
}
