package inside

import (
	"bufio"
	"context"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// releaseExecutablePages drops from this process's memory the pages of its
// own executable that it has touched: at start (the runtime and every
// package's initialisation touch much of a 23 MB binary that the agent
// never needs again) and after a burst of calls (which touches 8 MB of it:
// code, and the tables the collector reads to scan stacks). They stay in
// the page cache, shared by every agent of the engine; those the agent does
// use come back on first touch (minor faults: the first call after a quiet
// second took about 1 ms more here). Only read-only mappings of the executable
// are dropped (nothing is lost). It returns how many bytes of mappings it
// advised.
func releaseExecutablePages() int64 {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0
	}
	defer f.Close()
	var total int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// start-end perms offset dev inode path
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[5] != exe || strings.Contains(fields[1], "w") {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), unix.MADV_DONTNEED); errno == 0 {
			total += int64(end - start)
		}
	}
	return total
}

// quietRelease is how long the agent must have served no call before it
// gives the memory a burst of calls left free back to the system.
const quietRelease = time.Second

// releaseWhenQuiet returns free memory to the system once a burst of calls
// is over (a GC and a scavenge: a few ms, once per burst), and lets go of
// the executable's pages the burst touched, so an agent that ran thousands
// of commands is small again when its workspace idles.
func (s *Server) releaseWhenQuiet(ctx context.Context) {
	t := time.NewTicker(quietRelease)
	defer t.Stop()
	var seen, released int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n := s.calls.Load()
		if n != seen {
			seen = n // busy during the last tick
			continue
		}
		if n != released {
			released = n
			debug.FreeOSMemory()
			releaseExecutablePages()
		}
	}
}
