package worktree

import (
	"context"
	"sync"
)

// lockFile is the file patina flocks, inside the repository's common git
// dir, so that every process (sidecar, CLI) serialises on the same
// repository whatever its state directory.
const lockFile = "patina.lock"

// repoLock serialises patina's changes to one repository: a channel
// semaphore between goroutines of this process, then flock(2) between
// processes. Both are shared by every Repo value opened on the same common
// git dir.
type repoLock struct {
	sem  chan struct{}
	path string
}

var (
	repoLocksMu sync.Mutex
	repoLocks   = map[string]*repoLock{} // common git dir -> lock
)

// lockFor returns the process-wide lock of a common git dir.
func lockFor(commonDir, path string) *repoLock {
	repoLocksMu.Lock()
	defer repoLocksMu.Unlock()
	l, ok := repoLocks[commonDir]
	if !ok {
		l = &repoLock{sem: make(chan struct{}, 1), path: path}
		repoLocks[commonDir] = l
	}
	return l
}

// lock blocks until the repository is patina's alone or ctx is done.
func (l *repoLock) lock(ctx context.Context) (unlock func(), err error) {
	select {
	case l.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	release, err := flock(ctx, l.path)
	if err != nil {
		<-l.sem
		return nil, err
	}
	return func() {
		release()
		<-l.sem
	}, nil
}
