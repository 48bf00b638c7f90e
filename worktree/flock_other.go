//go:build !unix

package worktree

import "context"

// flock is a no-op where flock(2) does not exist: processes are then not
// serialised against each other, goroutines still are (see repoLock).
func flock(context.Context, string) (func(), error) { return func() {}, nil }
