//go:build !linux

package egress

import (
	"errors"
	"net"
	"net/netip"
)

func originalDst(*net.TCPConn) (netip.AddrPort, error) {
	return netip.AddrPort{}, errors.New("the egress proxy runs on Linux only")
}
