//go:build !linux

package hostdir

import (
	"errors"
	"fmt"
)

// ErrCannotSeal: only Linux can make a directory a nosuid,nodev bind mount
// of itself; elsewhere (macOS: the engine runs in a VM of its own) the
// directory is protected only by its parents' 0700 modes.
var ErrCannotSeal = errors.New("cannot make the directory nosuid,nodev")

// Seal needs Linux's mounts.
func Seal(string) error { return fmt.Errorf("%w: it needs Linux", ErrCannotSeal) }

// Unseal has nothing to undo without Linux.
func Unseal(string) error { return nil }

// Sealed is false without Linux.
func Sealed(string) bool { return false }
