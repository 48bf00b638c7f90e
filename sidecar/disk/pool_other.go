//go:build !linux

package disk

import (
	"context"
	"fmt"
)

// Pool keeps the workspaces' disks; it needs Linux.
type Pool struct{}

// Usage is how much of a disk is used.
type Usage struct {
	UsedMB, SizeMB int64
}

// Open answers ErrUnsupported: disks need Linux's loop devices.
func Open(context.Context, Config) (*Pool, error) {
	return nil, fmt.Errorf("%w: they need Linux", ErrUnsupported)
}

func (*Pool) SizeMB() int64                                         { return 0 }
func (*Pool) Path(string) string                                    { return "" }
func (*Pool) Create(context.Context, string, int64) (string, error) { return "", ErrUnsupported }
func (*Pool) Mount(context.Context, string) (string, error)         { return "", ErrUnsupported }
func (*Pool) Clone(context.Context, string, string) (string, error) {
	return "", ErrUnsupported
}
func (*Pool) Usage(string) (Usage, error)          { return Usage{}, ErrUnsupported }
func (*Pool) Remove(context.Context, string) error { return ErrUnsupported }
func (*Pool) IDs() ([]string, error)               { return nil, ErrUnsupported }
func (*Pool) Owned() ([]string, error)             { return nil, ErrUnsupported }

// Cleanup has nothing to undo without Linux.
func Cleanup(string) error { return nil }

// RemoveOwned has no pool to clean without Linux.
func RemoveOwned(string, string) error { return nil }
