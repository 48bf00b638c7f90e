package agent

import (
	"context"
	"fmt"

	"github.com/patina-dev/patina/sidecar/agent/wire"
)

// An upgraded sidecar adopts workspaces whose containers an earlier
// release made: their agent runs that release's binary (the container
// mounts its agent volume) and speaks wire.OldProtocol until the container is
// made anew (a fork, or a move at start). Such a client (ClientConfig.
// OldAgent) reads that protocol's exec results, whose output is inline in
// the result line; everything else on the wire is the same. Each answer
// is bounded by oldResultLimit and then held against the budget like any
// other; a container this release made is never spoken to this way (a
// hostile agent cannot choose the older, less bounded reading).

// oldOutput is an Output as OldProtocol sends it: the bytes inline.
type oldOutput struct {
	Data      []byte `json:"data,omitempty"`
	Tail      []byte `json:"tail,omitempty"`
	Size      int64  `json:"size"`
	Truncated bool   `json:"truncated,omitempty"`
}

// oldExecResult is an ExecResult as OldProtocol sends it.
type oldExecResult struct {
	wire.ExecResult
	Stdout oldOutput `json:"stdout"`
	Stderr oldOutput `json:"stderr"`
}

// current is r as ExecResult (the output's lengths) and its bytes.
func (r *oldExecResult) current() (wire.ExecResult, [4][]byte) {
	out := func(o oldOutput) wire.Output {
		return wire.Output{DataLen: len(o.Data), TailLen: len(o.Tail), Size: o.Size, Truncated: o.Truncated}
	}
	e := r.ExecResult
	e.Stdout, e.Stderr = out(r.Stdout), out(r.Stderr)
	return e, [4][]byte{r.Stdout.Data, r.Stdout.Tail, r.Stderr.Data, r.Stderr.Tail}
}

func (r *oldExecResult) validate(limit int) error {
	e, _ := r.current()
	return validExecResult(&e, limit)
}

// oldResultLimit is the longest OldProtocol exec result line: head and
// tail of two streams, base64, and room for the rest.
func (c *Client) oldResultLimit() int { return 4*c.cfg.OutputLimit*4/3 + 256<<10 }

// speaksOld reports whether the workspace's agent speaks OldProtocol
// (connecting first if need be).
func (c *Client) speaksOld(ctx context.Context) bool {
	if !c.cfg.OldAgent {
		return false
	}
	_, h, err := c.connection(ctx)
	return err == nil && h.Protocol == wire.OldProtocol
}

// oldLineHold is what a long OldProtocol result line holds: its limit, or
// the client's whole share if that is less (the share could never give
// more).
func (c *Client) oldLineHold() int64 {
	return min(int64(c.oldResultLimit()), c.share().Size())
}

// smallLine is how much of an answer's line is read before it must be
// taken from the budget (an OldProtocol result's: every other line is at
// most this long anyway).
const smallLine = 256 << 10

// oldResultCall is resultCall for an OldProtocol agent. A result line
// longer than smallLine is read further only once oldResultLimit bytes
// are taken from the client's share and the budget (waiting within ctx),
// and they are held until the Result's Release; a shorter one's output
// is taken once decoded.
func (c *Client) oldResultCall(ctx context.Context, method string, args any, o callOpts) (Result, error) {
	var out oldExecResult
	var release func()
	o.headLimit = c.oldResultLimit()
	o.bigLine = func() error {
		if c.cfg.Budget == nil {
			return nil
		}
		var err error
		release, err = c.takeAnswer(ctx, c.oldLineHold())
		return err
	}
	if _, err := c.call(ctx, method, args, &out, o); err != nil {
		if release != nil {
			release()
		}
		return Result{}, err
	}
	e, parts := out.current()
	if o.noOutput {
		if release != nil {
			release()
		}
		return Result{ExecResult: e.Session([4][]byte{})}, nil
	}
	if release == nil {
		var err error
		if release, err = c.takeAnswer(ctx, e.BodyLen()); err != nil {
			return Result{}, err
		}
	}
	return Result{ExecResult: e.Session(parts), release: release}, nil
}

// oldRefusal is the error for what an OldProtocol agent cannot do.
func oldRefusal(what string) error {
	return fmt.Errorf("%w: this workspace's container was made by an earlier patina, whose agent cannot %s; fork the workspace (the fork runs this patina's agent) and use the fork", wire.ErrConflict, what)
}
