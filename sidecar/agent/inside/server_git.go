package inside

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/sidecar/agent/wire"
	"github.com/patina-dev/patina/sidecar/mux"
)

// gitErr classifies a failure of the workspace's own repository: its
// state (broken, mid-rebase, no commit) prevents the operation, which is a
// conflict for the caller, not a fault of the agent.
func gitErr(err error) error {
	if err == nil || errors.Is(err, session.ErrInvalid) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: the workspace's repository: %v", wire.ErrConflict, err)
}

func (s *Server) git() (Git, error) {
	if s.cfg.Git == nil {
		return nil, fmt.Errorf("%w: this workspace has no repository", session.ErrInvalid)
	}
	return s.cfg.Git, nil
}

// gitCall decodes a call's arguments into req (nil: none), and runs do on
// the workspace's repository with a context that ends with the stream; its
// result, if not nil, is the answer.
func (s *Server) gitCall(st *mux.Stream, args json.RawMessage, req any, do func(context.Context, Git) (any, error)) error {
	if req != nil {
		if err := decodeArgs(args, req); err != nil {
			return err
		}
	}
	g, err := s.git()
	if err != nil {
		return err
	}
	ctx, cancel := streamContext(st)
	defer cancel()
	res, err := do(ctx, g)
	if err != nil {
		return gitErr(err)
	}
	if res != nil {
		writeResult(st, res)
	}
	return nil
}

func (s *Server) gitInit(st *mux.Stream, args json.RawMessage) error {
	var req wire.GitInitRequest
	return s.gitCall(st, args, &req, func(ctx context.Context, g Git) (any, error) {
		return struct{}{}, g.Init(ctx, req)
	})
}

func (s *Server) gitState(st *mux.Stream, args json.RawMessage) error {
	return s.gitCall(st, args, nil, func(ctx context.Context, g Git) (any, error) {
		return g.State(ctx)
	})
}

func (s *Server) gitCommit(st *mux.Stream, args json.RawMessage) error {
	var req wire.GitCommitRequest
	return s.gitCall(st, args, &req, func(ctx context.Context, g Git) (any, error) {
		return g.Commit(ctx, req)
	})
}

// gitPack streams a pack of what want reaches and have does not.
func (s *Server) gitPack(st *mux.Stream, args json.RawMessage) error {
	var req wire.GitPackRequest
	return s.gitCall(st, args, &req, func(ctx context.Context, g Git) (any, error) {
		if err := wire.WriteHead(st, struct{}{}); err != nil {
			return nil, nil
		}
		if err := g.Pack(ctx, req.Want, req.Have, st); err != nil {
			st.Reset("pack: " + err.Error())
			return nil, nil
		}
		_ = st.CloseWrite()
		return nil, nil
	})
}

// gitHas says whether the store of shipped objects has a commit.
func (s *Server) gitHas(st *mux.Stream, args json.RawMessage) error {
	var req wire.GitStoreRequest
	return s.gitCall(st, args, &req, func(ctx context.Context, g Git) (any, error) {
		return g.Has(ctx, req.Commit)
	})
}

// gitReceive stores the pack that is the call's body.
func (s *Server) gitReceive(st *mux.Stream, args json.RawMessage) error {
	var req wire.GitStoreRequest
	return s.gitCall(st, args, &req, func(ctx context.Context, g Git) (any, error) {
		return g.Receive(ctx, req.Commit, st)
	})
}
