package wire

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

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
		{"one pipe", PipesPreamble, []int{p}},
		{"three pipes", PipesPreamble, []int{p, p, p}},
		{"a file for a pipe", PipesPreamble, []int{p, f}},
		{"a socket for a pipe", PipesPreamble, []int{s, p}},
		{"descriptors without the preamble", "\x01\x00\x00\x00", []int{p, p}},
		{"a wrong preamble", "PATINA-PIPES/9\n", []int{p, p}},
		{"a preamble and more", PipesPreamble + "x", []int{p, p}},
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
