package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/patina-dev/patina/sidecar/mux"
)

// The real fixture's client talks to its agent over pipes: the agent holds
// pipes for it, and exec works through them.
func TestPipesUsed(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.client.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	f.client.mu.Lock()
	_, isPipe := f.client.conn.NetConn().(*mux.PipeConn)
	f.client.mu.Unlock()
	if !isPipe || f.client.noPipes.Load() {
		t.Fatalf("exp the connection on pipes, got pipe=%v noPipes=%v", isPipe, f.client.noPipes.Load())
	}
}

// An agent that does not take pipes (a plain mux server, as agents before
// them were) is spoken to on its socket, after one refused attempt.
func TestPipesOldAgent(t *testing.T) {
	c := fakeAgentPipes(t, func(st *mux.Stream) { st.Close() }, false)
	if _, err := c.Connect(context.Background()); err != nil {
		t.Fatalf("connect to an agent without pipes: %v", err)
	}
	if !c.noPipes.Load() {
		t.Fatal("exp the client to remember the agent takes no pipes")
	}
}

// AcceptPipes refuses descriptors sent any other way than the preamble
// and two pipes, and closes every one it got; a plain client's first
// bytes reach the mux.
func TestAcceptPipesHostile(t *testing.T) {
	file, err := os.CreateTemp(t.TempDir(), "f")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	sp, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(sp[0])
	defer syscall.Close(sp[1])
	p, f, s := int(pr.Fd()), int(file.Fd()), sp[0]
	// What the sent descriptors point to: counting the descriptors of this
	// process that point there (other tests' goroutines open and close
	// descriptors of their own meanwhile).
	var targets []string
	for _, fd := range []int{p, f, s} {
		target, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
		if err != nil {
			t.Fatal(err)
		}
		targets = append(targets, target)
	}
	cases := []struct {
		name string
		data string
		fds  []int
	}{
		{"one pipe", pipesPreamble, []int{p}},
		{"three pipes", pipesPreamble, []int{p, p, p}},
		{"a file for a pipe", pipesPreamble, []int{p, f}},
		{"a socket for a pipe", pipesPreamble, []int{s, p}},
		{"descriptors without the preamble", "\x01\x00\x00\x00", []int{p, p}},
		{"a wrong preamble", "PATINA-PIPES/9\n", []int{p, p}},
		{"a preamble and more", pipesPreamble + "x", []int{p, p}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := openFDs(t, targets)
			client, server := unixPair(t)
			defer client.Close()
			if _, _, err := client.WriteMsgUnix([]byte(c.data), syscall.UnixRights(c.fds...), nil); err != nil {
				t.Fatal(err)
			}
			nc, err := AcceptPipes(server, 5*time.Second)
			if !errors.Is(err, errBadPipes) || nc != nil {
				t.Fatalf("exp errBadPipes, got %v, %v", nc, err)
			}
			server.Close()
			client.Close()
			if after := openFDs(t, targets); after != before {
				t.Fatalf("open descriptors: %d before, %d after", before, after)
			}
		})
	}
	t.Run("plain mux client", func(t *testing.T) {
		client, server := unixPair(t)
		defer client.Close()
		if _, err := client.Write([]byte("\x01hello")); err != nil {
			t.Fatal(err)
		}
		nc, err := AcceptPipes(server, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		b := make([]byte, 6)
		if _, err := nc.Read(b[:2]); err != nil || string(b[:2]) != "\x01h" {
			t.Fatalf("exp the first bytes again, got %q, %v", b[:2], err)
		}
	})
	t.Run("silent client", func(t *testing.T) {
		client, server := unixPair(t)
		defer client.Close()
		if _, err := AcceptPipes(server, 50*time.Millisecond); err == nil || !strings.Contains(err.Error(), "timeout") {
			t.Fatalf("exp a timeout, got %v", err)
		}
	})
}

func unixPair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	conns := make([]*net.UnixConn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "pair")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c.(*net.UnixConn)
	}
	return conns[0], conns[1]
}

// openFDs counts this process's descriptors that point to one of targets.
func openFDs(t *testing.T, targets []string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		target, _ := os.Readlink("/proc/self/fd/" + e.Name())
		if slices.Contains(targets, target) {
			n++
		}
	}
	return n
}
