package disk

import "errors"

var (
	// ErrUnsupported: this host cannot give workspaces disks (not root, no
	// loop devices, no XFS with reflink, a missing mkfs).
	ErrUnsupported = errors.New("disk limits are not available here")
	// ErrNotFound: no disk for that workspace.
	ErrNotFound = errors.New("no such disk")
	// ErrExists: the workspace already has a disk.
	ErrExists = errors.New("disk exists")
	// ErrInvalid: a bad workspace id or size.
	ErrInvalid = errors.New("invalid disk request")
)
