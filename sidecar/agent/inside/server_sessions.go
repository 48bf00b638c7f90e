package inside

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/sidecar/agent/wire"
	"github.com/patina-dev/patina/sidecar/mux"
)

func (s *Server) sessionCreate(st *mux.Stream, args json.RawMessage) error {
	var req wire.CreateSessionRequest
	if err := decodeArgs(args, &req); err != nil {
		return err
	}
	if req.Cwd == "" {
		req.Cwd = s.cfg.Workdir
	}
	if err := checkSessionCwd(req.Cwd); err != nil {
		return err
	}
	ctx, cancel := streamContext(st)
	defer cancel()
	sess, err := s.sessions.Create(ctx, session.CreateRequest{ID: req.ID, Cwd: req.Cwd, Env: req.Env})
	if err != nil {
		return err
	}
	writeResult(st, sess.Info())
	return nil
}

func (s *Server) sessionList(st *mux.Stream, _ json.RawMessage) error {
	writeResult(st, s.sessions.List())
	return nil
}

// sessionCall decodes a call's arguments into req and finds the session
// they name (*sid, a field of req).
func (s *Server) sessionCall(args json.RawMessage, req any, sid *string) (*session.Session, error) {
	if err := decodeArgs(args, req); err != nil {
		return nil, err
	}
	return s.sessions.Get(*sid)
}

func (s *Server) sessionGet(st *mux.Stream, args json.RawMessage) error {
	var ref wire.SessionRef
	sess, err := s.sessionCall(args, &ref, &ref.Session)
	if err != nil {
		return err
	}
	writeResult(st, sess.Info())
	return nil
}

func (s *Server) sessionRemove(st *mux.Stream, args json.RawMessage) error {
	var ref wire.SessionRef
	if err := decodeArgs(args, &ref); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), sessionCallTimeout)
	defer cancel()
	if err := s.sessions.Remove(ctx, ref.Session); err != nil {
		return err
	}
	writeResult(st, struct{}{})
	return nil
}

// sessionFlush snapshots every session whose state changed (the
// workspace is about to stop).
func (s *Server) sessionFlush(st *mux.Stream, args json.RawMessage) error {
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	s.sessions.FlushSnapshots(ctx)
	writeResult(st, struct{}{})
	return nil
}

// sessionRevive gives an ended session (or every ended one) a new shell
// restored from its last snapshot.
func (s *Server) sessionRevive(st *mux.Stream, args json.RawMessage) error {
	var req wire.ReviveRequest
	if err := decodeArgs(args, &req); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), reviveTimeout)
	defer cancel()
	if req.Fresh {
		if req.Session == "" {
			return fmt.Errorf("%w: a fresh start names its session", session.ErrInvalid)
		}
		sess, err := s.sessions.Restart(ctx, req.Session)
		if err != nil {
			return err
		}
		writeResult(st, []session.Info{sess.Info()})
		return nil
	}
	ids := []string{req.Session}
	if req.Session == "" {
		ids = nil
		for _, inf := range s.sessions.List() {
			if inf.State == session.StateEnded {
				ids = append(ids, inf.ID)
			}
		}
	}
	var errs []error
	for _, id := range ids {
		if _, err := s.sessions.Revive(ctx, id); err != nil {
			if req.Session != "" {
				return err
			}
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		s.log.Warn("revive sessions", "err", errors.Join(errs...))
	}
	writeResult(st, s.sessions.List())
	return nil
}

func (s *Server) sessionEnv(st *mux.Stream, args json.RawMessage) error {
	var req wire.SetEnvRequest
	sess, err := s.sessionCall(args, &req, &req.Session)
	if err != nil {
		return err
	}
	ctx, cancel := streamContext(st)
	defer cancel()
	if err := sess.SetEnv(ctx, req.Env, req.Unset); err != nil {
		return err
	}
	writeResult(st, sess.Info())
	return nil
}

func (s *Server) history(st *mux.Stream, args json.RawMessage) error {
	var req wire.HistoryRequest
	sess, err := s.sessionCall(args, &req, &req.Session)
	if err != nil {
		return err
	}
	limit := req.Limit
	if limit <= 0 || limit > wire.MaxHistoryPage {
		limit = wire.MaxHistoryPage
	}
	out := sess.HistoryPage(req.After, limit, wire.HistoryPageBytes)
	if out == nil {
		out = []session.CommandInfo{}
	}
	writeResult(st, out)
	return nil
}

func (s *Server) command(st *mux.Stream, args json.RawMessage) error {
	var ref wire.CommandRef
	sess, err := s.sessionCall(args, &ref, &ref.Session)
	if err != nil {
		return err
	}
	ci, err := sess.Command(ref.Command)
	if err != nil {
		return err
	}
	writeResult(st, ci)
	return nil
}

// checkSessionCwd refuses a session directory that is not one in this container.
func checkSessionCwd(cwd string) error {
	if !filepath.IsAbs(cwd) {
		return fmt.Errorf("%w: cwd %q is not an absolute path", session.ErrInvalid, cwd)
	}
	fi, err := os.Stat(cwd)
	if err != nil || !fi.IsDir() {
		return fmt.Errorf("%w: cwd %s: no such directory in the workspace's container", session.ErrInvalid, cwd)
	}
	return nil
}

// quickWait is how long exec waits for a command before telling the
// caller its id: a fast command costs one answer, a slow one's id is known
// early (so a caller that loses the connection can wait for it again).
const quickWait = 2 * time.Millisecond

// exec runs a command. The command is not tied to the call: if the
// caller goes away, the command keeps running (the sidecar stops it
// explicitly when its own client leaves).
func (s *Server) exec(st *mux.Stream, args json.RawMessage) error {
	var req wire.ExecRequest
	if err := decodeArgs(args, &req); err != nil {
		return err
	}
	sess, err := s.sessions.Get(req.Session)
	if errors.Is(err, session.ErrNotFound) && req.Ensure {
		if req.Cwd != "" {
			if cerr := checkSessionCwd(req.Cwd); cerr != nil {
				return cerr
			}
		}
		sess, err = s.ensure(req)
	}
	if err == nil {
		// A shell killed from outside the session comes back from its
		// snapshot; the command's result says so.
		ctx, cancel := context.WithTimeout(context.Background(), reviveTimeout)
		sess, _, err = s.sessions.Recover(ctx, req.Session)
		cancel()
	}
	if err != nil {
		return err
	}
	if req.TimeoutMS < 0 || req.TimeoutMS > int64(time.Duration(1<<63-1)/time.Millisecond) {
		return fmt.Errorf("%w: timeout_ms out of range", session.ErrInvalid)
	}
	sreq := session.ExecRequest{Command: req.Command, Timeout: time.Duration(req.TimeoutMS) * time.Millisecond, TTY: req.TTY}
	if req.Stdin {
		if sreq.Stdin, err = readBody(st, s.cfg.MaxStdin); err != nil {
			return err
		}
		if sreq.Stdin == nil {
			sreq.Stdin = []byte{}
		}
	}
	id, err := sess.Start(context.Background(), sreq)
	if err != nil {
		return err
	}
	if req.Async {
		writeResult(st, wire.AsyncResult{CommandID: id})
		return nil
	}
	qctx, qcancel := context.WithTimeout(context.Background(), quickWait)
	res, err := sess.Wait(qctx, id)
	qcancel()
	if errors.Is(err, context.DeadlineExceeded) {
		b, _ := json.Marshal(wire.Head{ID: id})
		if _, werr := st.Write(append(b, '\n')); werr != nil {
			return nil // the caller left; the command runs on
		}
		ctx, cancel := streamContext(st)
		defer cancel()
		res, err = sess.Wait(ctx, id)
	}
	if err != nil {
		return err
	}
	writeExecResult(st, res)
	return nil
}

// ensure creates the session an exec names, once.
func (s *Server) ensure(req wire.ExecRequest) (*session.Session, error) {
	s.sessMu.Lock()
	defer s.sessMu.Unlock()
	if sess, err := s.sessions.Get(req.Session); err == nil {
		return sess, nil
	}
	cwd := req.Cwd
	if cwd == "" {
		cwd = s.cfg.Workdir
	}
	ctx, cancel := context.WithTimeout(context.Background(), sessionCallTimeout)
	defer cancel()
	return s.sessions.Create(ctx, session.CreateRequest{ID: req.Session, Cwd: cwd})
}

func (s *Server) wait(st *mux.Stream, args json.RawMessage) error {
	var ref wire.CommandRef
	sess, err := s.sessionCall(args, &ref, &ref.Session)
	if err != nil {
		return err
	}
	ctx, cancel := streamContext(st)
	defer cancel()
	res, err := sess.Wait(ctx, ref.Command)
	if err != nil {
		return err
	}
	writeExecResult(st, res)
	return nil
}

// signals maps each name of client.Signals (the API's list, which a
// test keeps this equal to) to its signal.
var signals = map[string]syscall.Signal{
	"INT": syscall.SIGINT, "TERM": syscall.SIGTERM, "KILL": syscall.SIGKILL,
	"HUP": syscall.SIGHUP, "QUIT": syscall.SIGQUIT, "USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2,
}

func (s *Server) signal(st *mux.Stream, args json.RawMessage) error {
	var req wire.SignalRequest
	sess, err := s.sessionCall(args, &req, &req.Session)
	if err != nil {
		return err
	}
	sig, ok := signals[req.Signal]
	if !ok {
		return fmt.Errorf("%w: signal %q", session.ErrInvalid, req.Signal)
	}
	ctx, cancel := context.WithTimeout(context.Background(), sessionCallTimeout)
	defer cancel()
	if err := sess.Signal(ctx, req.Command, sig); err != nil {
		return err
	}
	writeResult(st, struct{}{})
	return nil
}

// output sends a command's output from an offset: the bytes there now (up
// to Limit), or, with Follow, everything until the command ends.
func (s *Server) output(st *mux.Stream, args json.RawMessage) error {
	var req wire.OutputRequest
	sess, err := s.sessionCall(args, &req, &req.Session)
	if err != nil {
		return err
	}
	stream := session.Stream(req.Stream)
	if stream != session.Stdout && stream != session.Stderr {
		return fmt.Errorf("%w: stream %q (want stdout or stderr)", session.ErrInvalid, req.Stream)
	}
	if req.Offset < 0 || req.Limit < 0 {
		return fmt.Errorf("%w: negative offset or limit", session.ErrInvalid)
	}
	ci, err := sess.Command(req.Command)
	if err != nil {
		return err
	}
	size := int64(-1)
	if ci.State != session.CommandRunning {
		size = ci.StdoutBytes
		if stream == session.Stderr {
			size = ci.StderrBytes
		}
		if req.Offset > size {
			return fmt.Errorf("%w: offset %d is past the end of %s (%d bytes)", session.ErrInvalid, req.Offset, stream, size)
		}
	}
	ctx, cancel := streamContext(st)
	defer cancel()
	if req.Follow {
		rc, err := sess.Follow(ctx, req.Command, stream, req.Offset)
		if err != nil {
			return err
		}
		defer rc.Close()
		if err := wire.WriteHead(st, wire.OutputHead{Size: size}); err != nil {
			return nil
		}
		var r io.Reader = rc
		if req.Limit > 0 {
			r = io.LimitReader(rc, req.Limit)
		}
		if _, err := io.Copy(st, r); err != nil {
			st.Reset(err.Error())
			return nil
		}
		_ = st.CloseWrite()
		return nil
	}
	// What is there now, in chunks.
	first, err := sess.ReadOutput(req.Command, stream, req.Offset, chunk(req.Limit, 0))
	if err != nil {
		return err
	}
	if err := wire.WriteHead(st, wire.OutputHead{Size: size}); err != nil {
		return nil
	}
	sent := int64(0)
	for b := first; len(b) > 0; {
		if _, err := st.Write(b); err != nil {
			return nil
		}
		sent += int64(len(b))
		if req.Limit > 0 && sent >= req.Limit {
			break
		}
		if b, err = sess.ReadOutput(req.Command, stream, req.Offset+sent, chunk(req.Limit, sent)); err != nil {
			st.Reset(err.Error())
			return nil
		}
	}
	_ = st.CloseWrite()
	return nil
}

// chunk is the size of the next read of at most limit bytes (0: no limit)
// after sent.
func chunk(limit, sent int64) int {
	const c = 256 << 10
	if limit <= 0 || limit-sent > c {
		return c
	}
	return int(limit - sent)
}

// smallAnswer is the most output sent in the same frame as its result.
const smallAnswer = 16 << 10

// writeExecResult answers with a command's result: its line, then its
// output's bytes (see Output), and ends the stream.
func writeExecResult(st *mux.Stream, res session.ExecResult) {
	r, parts := wire.ExecResultOf(res)
	b, err := wire.ResultLine(r)
	if err != nil {
		writeErr(st, &wire.Error{Code: wire.CodeInternal, Msg: err.Error()})
		return
	}
	if r.BodyLen() <= smallAnswer {
		// One frame, as any other answer.
		for _, p := range parts {
			b = append(b, p...)
		}
		_, _ = st.WriteFinal(b)
		return
	}
	if _, err := st.Write(b); err != nil {
		return
	}
	for _, p := range parts {
		if len(p) > 0 {
			if _, err := st.Write(p); err != nil {
				return
			}
		}
	}
	_ = st.CloseWrite()
}

// sessionCallTimeout bounds a session call that outlives its request's
// context (create, remove, signal: each may start or stop a shell and its
// process tree, which takes at most the session's StartTimeout of 15 s or
// its InterruptGrace and a kill): generous, so that it ends only a call
// that hangs.
const sessionCallTimeout = 30 * time.Second
