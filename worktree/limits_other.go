//go:build !linux

package worktree

import "os"

// apply does nothing here: the limits are set on Linux only.
func (l procLimits) apply(pid int) error { return nil }

func (l procLimits) hitCPU(ps *os.ProcessState) bool { return false }
