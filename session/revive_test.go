package session

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Revive restarts an ended session's shell with its state and history, as
// after a container restart that killed every process.
func TestRevive(t *testing.T) {
	m := newManager(t)
	s := mustCreate(t, m, CreateRequest{ID: "revive", Env: map[string]string{"FROM_CREATE": "1"}})
	dir := t.TempDir()
	out(t, s, "cd "+dir+"; export KEPT=yes; rf() { echo rf; }")
	waitSnapshot(t, s, "1")
	// Everything dies behind the session's back.
	s.killAll(context.Background())
	waitFor(t, "the session to end", 5*time.Second, func() bool { return s.Info().State == StateEnded })
	if _, err := s.Exec(context.Background(), ExecRequest{Command: "true"}); !errors.Is(err, ErrEnded) {
		t.Fatalf("exp ErrEnded, got %v", err)
	}
	s2, err := m.Revive(context.Background(), "revive")
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, s2, `echo "$PWD $KEPT $FROM_CREATE $(rf)"`)
	if string(res.Stdout.Data) != dir+" yes 1 rf\n" || res.CommandID != "2" {
		t.Fatalf("exp restored state as command 2, got %q as %s", res.Stdout.Data, res.CommandID)
	}
	if len(s2.History()) != 2 {
		t.Fatalf("exp history to continue, got %+v", s2.History())
	}
	// A replacement after the revive still works (the supervisor knows the
	// generation).
	r := runReq(t, s2, ExecRequest{Command: "trap '' INT; while :; do :; done", Timeout: 100 * time.Millisecond})
	if !r.ShellReplaced {
		t.Fatalf("exp a replaced shell, got %+v", r)
	}
	expectOut(t, s2, "echo $KEPT", "yes\n")
	// Closed sessions stay closed.
	if err := s2.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Revive(context.Background(), "revive"); !errors.Is(err, ErrClosed) {
		t.Fatalf("exp ErrClosed, got %v", err)
	}
}
