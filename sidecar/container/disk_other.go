//go:build !linux

package container

import (
	"context"
	"fmt"
)

// BindDisk needs Linux's mounts.
func (d *Docker) BindDisk(context.Context, string, string) error {
	return fmt.Errorf("%w: it needs Linux", ErrDiskUnsupported)
}

func (d *Docker) unbindDisk(context.Context, string) {}

func unbindLayer(context.Context, API, string) error { return nil }
