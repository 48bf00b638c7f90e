//go:build !linux

package session

// startTick needs Linux's boot-time clock and /proc: "" elsewhere.
func (c *command) startTick() string { return "" }
