package session

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// newManager opens a Manager on a fresh directory with the local launcher
// (real bash on this machine) and closes every session at the end.
func newManager(t *testing.T, mods ...func(*Config)) *Manager {
	t.Helper()
	cfg := Config{Dir: t.TempDir(), Launcher: LocalLauncher{}, InterruptGrace: 300 * time.Millisecond}
	for _, f := range mods {
		f(&cfg)
	}
	m, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open manager: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		m.CloseAll(ctx)
		m.Close()
	})
	return m
}

func mustCreate(t *testing.T, m *Manager, req CreateRequest) *Session {
	t.Helper()
	s, err := m.Create(context.Background(), req)
	if err != nil {
		t.Fatalf("create session: %v", err)
	}
	return s
}

// run execs cmd with a hang guard and fails the test on an error.
func run(t *testing.T, s *Session, cmd string) ExecResult {
	t.Helper()
	return runReq(t, s, ExecRequest{Command: cmd})
}

func runReq(t *testing.T, s *Session, req ExecRequest) ExecResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := s.Exec(ctx, req)
	if err != nil {
		t.Fatalf("exec %q: %v", req.Command, err)
	}
	return res
}

// out runs cmd, requires exit 0 and returns its stdout.
func out(t *testing.T, s *Session, cmd string) string {
	t.Helper()
	res := run(t, s, cmd)
	if res.ExitCode != 0 {
		t.Fatalf("exec %q: exit %d, stderr %q", cmd, res.ExitCode, res.Stderr.Data)
	}
	return string(res.Stdout.Data)
}

func expectOut(t *testing.T, s *Session, cmd, exp string) {
	t.Helper()
	if got := out(t, s, cmd); got != exp {
		t.Fatalf("exec %q: exp stdout %q, got %q", cmd, exp, got)
	}
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid string) bool {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return false
	}
	st := string(b)
	i := strings.LastIndex(st, ") ")
	return i >= 0 && !strings.HasPrefix(st[i+2:], "Z")
}

// markedPIDs lists live processes whose environment holds marker.
func markedPIDs(marker string) []string {
	var pids []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if string(kv) == marker && alive(e.Name()) {
				pids = append(pids, e.Name())
			}
		}
	}
	return pids
}

func expectErr(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("exp error %v, got %v", target, err)
	}
}
