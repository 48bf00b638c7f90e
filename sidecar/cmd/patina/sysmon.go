package main

import (
	"context"
	"os"
	"strings"
	"syscall"
)

// The Go runtime's monitor thread (sysmon) sleeps 20 µs at a time after
// any wake-up of an idle process by a system call, and backs off only
// after 1 ms without work for it. A sidecar under exec traffic goes idle
// and wakes several times a millisecond (each exec waits on its agent), so
// its sysmon never backed off: 50,000 sleeps a second, a third of the
// sidecar's CPU on a 2-CPU VM. The runtime skips that deep sleep, and so
// the reset, only while GODEBUG's schedtrace is set; with its longest
// period (2^31-1 ms, 24.8 days) sysmon settles at its 10 ms tick and the
// runtime prints one scheduler line to stderr per 24.8 days of uptime.
// In alternating runs on that VM: the sidecar's CPU per exec fell by 30%
// (sequential 300 → 200 µs, 100 sessions concurrently 228 → 160 µs), at
// 100 wake-ups a second when idle (0.3% of a CPU).
//
// The agent (patina agent serve) does the same: an agent idles twice per
// exec (waiting for the sidecar, then for its shell), and each time its
// next system call woke sysmon for two more context switches. With the
// setting, in alternating runs: 7.6 → 2.5 context switches and 320 → 230
// µs of agent CPU per sequential exec, exec p50 about 55 µs lower; the
// price is the same 100 wake-ups a second in each idle workspace (16
// clock ticks a minute against 2: 0.27% of a CPU on that VM).
const (
	sysmonSetting = "schedtrace=2147483647"
	// envSavedGODEBUG carries the GODEBUG patina serve was started with
	// across its re-execution, so that its children get that one back.
	envSavedGODEBUG = "PATINA_SAVED_GODEBUG"
)

// keepSysmonAwake re-executes this program with sysmonSetting added to
// GODEBUG, unless GODEBUG already names schedtrace (the user's choice, or
// this is the re-executed program: then the saved GODEBUG is put back for
// its children). It returns only when it did not re-execute. serve and
// agent serve call it first thing: nothing has started yet that the
// re-execution would lose.
func keepSysmonAwake(ctx context.Context) {
	godebug := os.Getenv("GODEBUG")
	if saved, ok := os.LookupEnv(envSavedGODEBUG); ok {
		_ = os.Unsetenv(envSavedGODEBUG)
		if saved == "" {
			_ = os.Unsetenv("GODEBUG")
		} else {
			_ = os.Setenv("GODEBUG", saved)
		}
		return
	}
	if hasSchedtrace(godebug) || ctx.Err() != nil { // a signal to stop came already
		return
	}
	env := make([]string, 0, len(os.Environ())+2)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GODEBUG=") {
			env = append(env, kv)
		}
	}
	env = append(env, "GODEBUG="+strings.TrimPrefix(godebug+","+sysmonSetting, ","), envSavedGODEBUG+"="+godebug)
	// The executable's own path keeps the process's name (ps, pgrep);
	// /proc/self/exe would name it "exe". On failure serve goes on as it is.
	if self, err := os.Executable(); err == nil {
		_ = syscall.Exec(self, os.Args, env)
	}
	_ = syscall.Exec("/proc/self/exe", os.Args, env)
}

// hasSchedtrace reports whether a GODEBUG value sets schedtrace.
func hasSchedtrace(godebug string) bool {
	for _, kv := range strings.Split(godebug, ",") {
		if strings.HasPrefix(strings.TrimSpace(kv), "schedtrace=") {
			return true
		}
	}
	return false
}
