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

// dialInNetns connects to sa (an abstract unix socket "@...", or a TCP
// address) from the network namespace ns. Abstract sockets are scoped by
// network namespace, so only a process inside that container can be
// listening there: no path is looked up (no symlink, FIFO or socket file
// to swap), and nothing of the container's is read.
//
// Only the socket is made inside the namespace (a socket keeps the
// namespace it was made in), on an OS thread that enters it and then
// leaves; a thread that cannot leave is never reused (it stays locked and
// exits with its goroutine). The connect happens outside, non-blocking: a
// listener that never accepts, or a peer that never answers, cannot make
// it wait past ctx.
func dialInNetns(ctx context.Context, ns *os.File, sa unix.Sockaddr) (net.Conn, error) {
	domain := unix.AF_UNIX
	switch sa.(type) {
	case *unix.SockaddrInet4:
		domain = unix.AF_INET
	case *unix.SockaddrInet6:
		domain = unix.AF_INET6
	}
	type result struct {
		fd  int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{-1, fmt.Errorf("open this thread's network namespace: %w", err)}
			return
		}
		defer self.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{-1, fmt.Errorf("enter the container's network namespace: %w", err)}
			return
		}
		fd, err := unix.Socket(domain, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if rerr := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); rerr == nil {
			runtime.UnlockOSThread()
		} // else: the thread stays locked and dies with this goroutine
		ch <- result{fd, err}
	}()
	r := <-ch
	if r.err != nil {
		return nil, fmt.Errorf("connect to the agent: %w", r.err)
	}
	fd := r.fd
	if err := connectFD(ctx, fd, sa); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("connect to the agent: %w", err)
	}
	f := os.NewFile(uintptr(fd), "agent")
	c, err := net.FileConn(f)
	f.Close()
	return c, err
}

// connectFD connects the non-blocking socket fd to sa, waiting (while ctx
// lasts) for a TCP connection to complete.
func connectFD(ctx context.Context, fd int, sa unix.Sockaddr) error {
	err := unix.Connect(fd, sa)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EAGAIN):
		return errors.New("the agent's socket does not accept connections (its backlog is full)")
	case !errors.Is(err, unix.EINPROGRESS):
		return err
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		n, err := unix.Poll(pfd, 100)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return err
		}
		if n > 0 {
			soerr, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
			if err != nil {
				return err
			}
			if soerr != 0 {
				return unix.Errno(soerr)
			}
			return nil
		}
	}
}
