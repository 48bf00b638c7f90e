package session

import (
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// startTick is when c started, in the clock ticks (1/100 s since boot) of
// the start times in /proc/PID/stat, as killtree's stop mode takes it. It
// errs early, by up to two ticks; "" if the clock cannot be read.
func (c *command) startTick() string {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return ""
	}
	const tick = 10 * time.Millisecond
	now := int64(ts.Sec)*100 + int64(ts.Nsec)/int64(tick)
	elapsed := int64((time.Since(c.started) + tick - 1) / tick)
	return strconv.FormatInt(now-elapsed, 10)
}
