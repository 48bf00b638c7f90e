package client

import (
	"errors"
	"net"
	"syscall"
)

// NotSent reports whether err means no connection to the sidecar could be
// made (refused, unreachable, a failed dial or name lookup): the request
// never reached it, so nothing ran and it is safe to retry.
func NotSent(err error) bool {
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}

// RootCause returns the innermost error of a chain ("connection refused"
// rather than a long `Post "http://..."` prefix).
func RootCause(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}
