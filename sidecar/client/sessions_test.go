package client

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// fakeSessions stands in for the sidecar: it records calls and answers
// with the errors given (the HTTP side is tested against a real sidecar in
// tests/).
type fakeSessions struct {
	calls             []string
	createErr, delErr error
}

func (f *fakeSessions) CreateSession(_ context.Context, ws string, req CreateSessionRequest) (Session, error) {
	f.calls = append(f.calls, "create "+ws+"/"+req.ID)
	return Session{ID: req.ID}, f.createErr
}

func (f *fakeSessions) DeleteSession(_ context.Context, ws, sid string) error {
	f.calls = append(f.calls, "delete "+ws+"/"+sid)
	return f.delErr
}

func (f *fakeSessions) RestartSession(_ context.Context, ws, sid string) (Session, error) {
	f.calls = append(f.calls, "restart "+ws+"/"+sid)
	return Session{ID: sid}, nil
}

func TestEnsureAndResetSession(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name              string
		run               func(SessionAPI) error
		createErr, delErr error
		calls             []string
		exp               error
	}{
		{"ensure", func(c SessionAPI) error { return EnsureSession(ctx, c, "w", "s") }, nil, nil, []string{"create w/s"}, nil},
		{"ensure, made meanwhile", func(c SessionAPI) error { return EnsureSession(ctx, c, "w", "s") }, ErrConflict, nil, []string{"create w/s"}, nil},
		{"ensure, no workspace", func(c SessionAPI) error { return EnsureSession(ctx, c, "w", "s") }, ErrNotFound, nil, []string{"create w/s"}, ErrNotFound},
		{"reset named", func(c SessionAPI) error { return ResetSession(ctx, c, "w", "s") }, nil, nil, []string{"delete w/s", "create w/s"}, nil},
		{"reset named, gone already", func(c SessionAPI) error { return ResetSession(ctx, c, "w", "s") }, nil, ErrNotFound, []string{"delete w/s", "create w/s"}, nil},
		{"reset default", func(c SessionAPI) error { return ResetSession(ctx, c, "w", DefaultSession) }, nil, nil, []string{"delete w/default"}, nil},
		{"reset, delete fails", func(c SessionAPI) error { return ResetSession(ctx, c, "w", "s") }, nil, ErrBusy, []string{"delete w/s"}, ErrBusy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeSessions{createErr: tc.createErr, delErr: tc.delErr}
			err := tc.run(f)
			if (tc.exp == nil) != (err == nil) || (tc.exp != nil && !errors.Is(err, tc.exp)) {
				t.Fatalf("exp %v, got %v", tc.exp, err)
			}
			if !slices.Equal(f.calls, tc.calls) {
				t.Fatalf("exp calls %v, got %v", tc.calls, f.calls)
			}
		})
	}
}

func TestInSession(t *testing.T) {
	missing := &APIError{Status: 404, Code: CodeNotFound, Message: "no session"}
	ended := &APIError{Status: 409, Code: CodeEnded, Message: "ended"}
	cases := []struct {
		name      string
		sid       string
		restart   bool
		first     error
		exp       []string
		calls     int
		restarted bool
		err       error
	}{
		{"works", "s", true, nil, nil, 1, false, nil},
		{"missing is created", "s", true, missing, []string{"create w/s"}, 2, false, nil},
		{"missing default is the sidecar's to create", DefaultSession, true, missing, nil, 1, false, ErrNotFound},
		{"ended is restarted, keeping its history", "s", true, ended, []string{"restart w/s"}, 2, true, nil},
		{"ended default is restarted too", DefaultSession, true, ended, []string{"restart w/default"}, 2, true, nil},
		{"ended without restart fails", "s", false, ended, nil, 1, false, ErrEnded},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeSessions{}
			n, restarted := 0, false
			err := InSession(context.Background(), f, SessionCall{Workspace: "w", Session: c.sid, Restart: c.restart, OnRestart: func() { restarted = true }},
				func() error {
					n++
					if n == 1 {
						return c.first
					}
					return nil
				})
			if !errors.Is(err, c.err) || (c.err == nil && err != nil) || n != c.calls || restarted != c.restarted || strings.Join(f.calls, ",") != strings.Join(c.exp, ",") {
				t.Fatalf("exp err %v, %d calls, restarted %v, session calls %v; got %v, %d, %v, %v", c.err, c.calls, c.restarted, c.exp, err, n, restarted, f.calls)
			}
		})
	}
}
