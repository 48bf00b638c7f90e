//go:build !windows

package main

import "golang.org/x/sys/unix"

// The ioctls that read and set a terminal's modes.
const (
	ioctlGetTermios = unix.TCGETS
	ioctlSetTermios = unix.TCSETS
)
