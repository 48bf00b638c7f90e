package worktree

import (
	"fmt"
	"time"
)

// procLimits bound one git process the host runs (Config.GitMemoryBytes,
// Config.GitCPUTime). A zero field is no bound.
//
// They are set with prlimit(2) on the child right after it has started
// (Go's os/exec has no way to set rlimits for a child), and before the
// runner writes a byte of its standard input. So index-pack, cat-file
// --batch and rev-list --stdin, which read what a workspace sent from
// standard input, are bound before they see any of it. Commands naming
// objects in their arguments (diff-tree, merge-tree, read-tree) may begin
// in the moment before the limits land; what they can reach then has
// passed the pack scanner (every object and the total within
// MaxSingleObjectBytes and MaxObjectBytes), so the window costs at most
// what those limits allow. A wrapper process would close it, at the price
// of an exec per git call and a patina binary that must be re-executable
// from every program that links this package (tests included).
type procLimits struct {
	memory int64         // RLIMIT_DATA in bytes: the heap, not the packs git maps read-only
	cpu    time.Duration // RLIMIT_CPU, rounded up to whole seconds
}

func (l procLimits) on() bool { return l.memory > 0 || l.cpu > 0 }

// cpuSeconds is the CPU limit in whole seconds, rounded up.
func (l procLimits) cpuSeconds() uint64 {
	return uint64((l.cpu + time.Second - 1) / time.Second)
}

func (l procLimits) String() string {
	return fmt.Sprintf("memory %s, CPU %s", formatBytes(l.memory), l.cpu)
}
