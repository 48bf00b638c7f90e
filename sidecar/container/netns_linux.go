package container

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// dialInNetns connects to the abstract unix socket name ("@...") in the
// network namespace ns. Abstract sockets are scoped by network namespace,
// so only a process inside that container can be listening there: no path
// is looked up (no symlink, FIFO or socket file to swap), and nothing of
// the container's is read.
//
// The socket is made on an OS thread that enters the namespace and then
// leaves it; a thread that cannot leave is never reused (it stays locked
// and exits with its goroutine). The socket is non-blocking, so a listener
// that never accepts cannot make the connect wait.
func dialInNetns(ctx context.Context, ns *os.File, name string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("open this thread's network namespace: %w", err)}
			return
		}
		defer self.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("enter the container's network namespace: %w", err)}
			return
		}
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err == nil {
			err = unix.Connect(fd, &unix.SockaddrUnix{Name: name})
			if errors.Is(err, unix.EAGAIN) {
				err = errors.New("the agent's socket does not accept connections (its backlog is full)")
			}
		}
		if rerr := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); rerr == nil {
			runtime.UnlockOSThread()
		} // else: the thread stays locked and dies with this goroutine
		if err != nil {
			if fd >= 0 {
				unix.Close(fd)
			}
			ch <- result{err: fmt.Errorf("connect to the agent: %w", err)}
			return
		}
		f := os.NewFile(uintptr(fd), "agent")
		c, err := net.FileConn(f)
		f.Close()
		ch <- result{c: c, err: err}
	}()
	select {
	case r := <-ch:
		return r.c, r.err
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.c != nil {
				r.c.Close()
			}
		}()
		return nil, ctx.Err()
	}
}
