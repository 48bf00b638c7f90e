//go:build !linux

package inside

import "errors"

// execShellInit is Linux's (the container's init runs on Linux).
func execShellInit() error { return errors.ErrUnsupported }
