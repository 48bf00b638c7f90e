//go:build !unix

package worktree

import "context"

// flock is a no-op where flock(2) does not exist: processes are then not
// serialised against each other, goroutines still are (see repoLock).
func flock(context.Context, string) (func(), error) { return func() {}, nil }

// tryFlock always succeeds where flock(2) does not exist: a quarantine in
// use by another process may then be removed by Open.
func tryFlock(string) (func(), bool, error) { return func() {}, true, nil }
