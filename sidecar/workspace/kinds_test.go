package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"

	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/sidecar/agent"
	"github.com/patina-dev/patina/sidecar/agent/wire"
	"github.com/patina-dev/patina/sidecar/engine"
	"github.com/patina-dev/patina/sidecar/template"
	"github.com/patina-dev/patina/worktree"
)

func TestKind(t *testing.T) {
	cases := []struct {
		err  error
		want error
	}{
		{fmt.Errorf("exec: %w", session.ErrBusy), ErrBusy},
		{&session.EndedError{Session: "s", ExitCode: 4}, ErrEnded},
		{fmt.Errorf("%w: x", session.ErrClosed), ErrEnded},
		{fmt.Errorf("%w: x", session.ErrNotRunning), ErrNotRunning},
		{fmt.Errorf("%w: x", wire.ErrEscapes), ErrInvalid},
		{fmt.Errorf("%w: x", wire.ErrTooLarge), ErrTooLarge},
		{fmt.Errorf("%w: x", wire.ErrNotListening), ErrNotListening},
		{fmt.Errorf("%w: x", agent.ErrUnavailable), ErrAgentUnavailable},
		{fmt.Errorf("%w: x", session.ErrLocked), ErrAgentUnavailable},
		{fmt.Errorf("%w: x", worktree.ErrConflict), ErrConflict},
		{fmt.Errorf("%w: x", worktree.ErrRejected), ErrRejected},
		{fmt.Errorf("%w: x", worktree.ErrTooLarge), ErrTooLarge},
		{fmt.Errorf("%w: x", worktree.ErrNotFound), ErrNotFound},
		{fmt.Errorf("%w: x", template.ErrInUse), ErrConflict},
		{fmt.Errorf("%w: x", template.ErrBuild), ErrInvalid},
		{fmt.Errorf("%w: x", engine.ErrImageMissing), ErrUnavailable},
		{fmt.Errorf("%w: x", engine.ErrNotPlaced), ErrUnavailable},
		{&fs.PathError{Op: "open", Path: "x", Err: syscall.ENOENT}, ErrNotFound},
		{&fs.PathError{Op: "open", Path: "x", Err: syscall.EISDIR}, ErrInvalid},
		{fmt.Errorf("%w: w", ErrExists), ErrConflict},
		{fmt.Errorf("%w: w", ErrStopped), ErrStopped},
		{fmt.Errorf("%w: w", ErrUnreviewed), ErrConflict},
		{errors.New("something else"), nil},
		{nil, nil},
	}
	for _, c := range cases {
		if got := Kind(c.err); got != c.want {
			t.Errorf("Kind(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
