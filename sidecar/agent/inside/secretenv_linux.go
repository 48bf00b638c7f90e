//go:build linux

package inside

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// takeSecretEnv returns the value of the environment variable name and
// removes it from where another process of the container could read it:
// from the environment this process hands its children, and from the
// environment block the kernel shows as /proc/<pid>/environ (overwritten
// with NULs in place, through /proc/self/mem). With seal, the process is
// also made non-dumpable, which closes its /proc/<pid>/environ, mem and fd
// to anyone without CAP_SYS_PTRACE, which a workspace's container does not
// have; the container's PID 1 is not sealed: a sidecar enters the
// container's namespaces through it, and one run in a container (no
// CAP_SYS_PTRACE either) could not. A process that has no such variable is
// left as it is. The error says what could not be done; the value is
// returned all the same.
func takeSecretEnv(name string, seal bool) (string, error) {
	v, ok := os.LookupEnv(name)
	if !ok {
		return "", nil
	}
	_ = os.Unsetenv(name)
	errScrub := scrubEnviron(name)
	var errDump error
	if !seal {
		return v, errScrub
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		errDump = fmt.Errorf("make the process non-dumpable: %w", err)
	}
	return v, errors.Join(errScrub, errDump)
}

// scrubEnviron overwrites the values of name in this process's initial
// environment block (what /proc/self/environ shows) with NULs.
func scrubEnviron(name string) error {
	start, end, err := environBounds()
	if err != nil {
		return err
	}
	if end <= start || end-start > 1<<20 {
		return fmt.Errorf("scrub %s: environment block %#x-%#x out of bounds", name, start, end)
	}
	mem, err := os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("scrub %s: %w", name, err)
	}
	defer mem.Close()
	block := make([]byte, end-start)
	if _, err := mem.ReadAt(block, int64(start)); err != nil {
		return fmt.Errorf("scrub %s: read the environment block: %w", name, err)
	}
	prefix := []byte(name + "=")
	for off := 0; off < len(block); {
		n := bytes.IndexByte(block[off:], 0)
		if n < 0 {
			n = len(block) - off
		}
		if entry := block[off : off+n]; bytes.HasPrefix(entry, prefix) {
			at := off + len(prefix)
			if _, err := mem.WriteAt(make([]byte, n-len(prefix)), int64(start)+int64(at)); err != nil {
				return fmt.Errorf("scrub %s: %w", name, err)
			}
		}
		off += n + 1
	}
	return nil
}

// environBounds reads env_start and env_end (fields 50 and 51 of
// /proc/self/stat, Linux 3.5 and later).
func environBounds() (start, end uint64, err error) {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, 0, err
	}
	i := bytes.LastIndexByte(stat, ')') // the command name may hold spaces and parentheses
	if i < 0 {
		return 0, 0, errors.New("/proc/self/stat: no command name")
	}
	fields := strings.Fields(string(stat[i+1:])) // fields[0] is field 3
	const envStart, envEnd = 50, 51
	if len(fields) < envEnd-2 {
		return 0, 0, fmt.Errorf("/proc/self/stat: %d fields, want %d", len(fields)+2, envEnd)
	}
	if start, err = strconv.ParseUint(fields[envStart-3], 10, 64); err == nil {
		end, err = strconv.ParseUint(fields[envEnd-3], 10, 64)
	}
	return start, end, err
}
