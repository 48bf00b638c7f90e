package agent

import (
	"context"
	"fmt"
	"sync"

	"github.com/patina-dev/patina/sidecar/budget"
)

// shareOf is how much of a budget of size bytes one client's exec answers
// may hold at once: a quarter, and at least one answer of the largest
// output (four parts of outputLimit bytes), so that the agent of one
// workspace, which may declare the largest lengths and then send nothing
// until CallTimeout, never holds what the other workspaces' answers wait
// for.
func shareOf(size int64, outputLimit int) int64 {
	return min(max(size/4, 4*int64(outputLimit)), size)
}

// takeAnswer takes n bytes of an exec answer's output from the client's
// share (waiting, within ctx, while its other answers hold it all), then
// from the budget; release gives them back (once, whatever the calls).
// Without a budget it takes nothing (release nil).
func (c *Client) takeAnswer(ctx context.Context, n int64) (release func(), err error) {
	b := c.cfg.Budget
	if b == nil || n <= 0 {
		return nil, nil
	}
	share := c.share()
	if err := share.Acquire(ctx, n); err != nil {
		return nil, fmt.Errorf("%w (this workspace's answers held all of their share of it, %d bytes, for too long): %w", budget.ErrSpent, share.Size(), ctx.Err())
	}
	if err := b.Acquire(ctx, n); err != nil {
		share.Release(n)
		return nil, err
	}
	return sync.OnceFunc(func() {
		b.Release(n)
		share.Release(n)
	}), nil
}
