package workspace

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"
)

// TestPoolFillsAFewAtATime: the warm pool fills with at most poolFillers
// creates under way (a refill must not take the engine from the
// workspaces just given out), and a workspace taken from it has its first
// session started already, idle, with no command of anyone.
func TestPoolFillsAFewAtATime(t *testing.T) {
	eng := newFakeEngine(t)
	eng.createDelay = 30 * time.Millisecond
	m, err := New(Config{StateDir: t.TempDir(), DefaultImage: "img", AdoptWait: 2 * time.Second, InterruptGrace: 200 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler), WarmPool: 6}, eng, fakeImages{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	<-m.Adopt() // the pool starts once adoption is done
	full := func() {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for m.Pool().Ready < 6 {
			if time.Now().After(deadline) {
				t.Fatalf("the pool did not fill: %+v", m.Pool())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	full()
	if got := eng.maxCreating.Load(); got > poolFillers || got < 1 {
		t.Fatalf("%d creates were under way at once while the pool filled (at most %d)", got, poolFillers)
	}
	ctx := context.Background()
	for _, name := range []string{"a", "b", "c"} {
		ws, err := m.Create(ctx, CreateRequest{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		if m.poolTaken.Load() == 0 {
			t.Fatalf("create %s did not take a pooled workspace: %+v", name, ws)
		}
		ss, err := m.Sessions(ctx, name)
		if err != nil || len(ss) != 1 || ss[0].ID != DefaultSession || string(ss[0].State) != "idle" || ss[0].Commands != 0 {
			t.Fatalf("workspace %s's sessions when taken: %+v, %v (want default, idle, no command)", name, ss, err)
		}
	}
	// A create with its own environment, secret environment and idle stop
	// takes one too: its shells have them, the first session included.
	taken := m.poolTaken.Load()
	if _, err := m.Create(ctx, CreateRequest{Name: "d", Env: map[string]string{"MINE": "d"}, SecretEnv: map[string]string{"TOKEN": "s3cret"}, IdleStop: "1h"}); err != nil {
		t.Fatal(err)
	}
	if m.poolTaken.Load() != taken+1 {
		t.Fatal("a create with env did not take a pooled workspace")
	}
	if got := out(t, m, "d", "default", "echo $MINE $TOKEN"); got != "d s3cret\n" {
		t.Fatalf("the first session of a pooled workspace given env: %q", got)
	}
	if _, err := m.CreateSession(ctx, "d", CreateSessionRequest{ID: "later"}); err != nil {
		t.Fatal(err)
	}
	if got := out(t, m, "d", "later", "echo $MINE $TOKEN"); got != "d s3cret\n" {
		t.Fatalf("a new session of a pooled workspace given env: %q", got)
	}
	if inf, err := m.Get("d"); err != nil || inf.Env["MINE"] != "d" || inf.IdleStop != "1h0m0s" {
		t.Fatalf("the workspace's record: %+v %v", inf, err)
	}
	// A variable its shell will not take (read-only in bash) costs no
	// pooled workspace: the first session starts anew at the first exec.
	taken = m.poolTaken.Load()
	if _, err := m.Create(ctx, CreateRequest{Name: "ro", Env: map[string]string{"UID": "5", "OTHER": "o"}}); err != nil {
		t.Fatal(err)
	}
	if m.poolTaken.Load() != taken+1 {
		t.Fatal("a create with a read-only variable did not take a pooled workspace")
	}
	if got := out(t, m, "ro", "default", "echo $OTHER"); got != "o\n" {
		t.Fatalf("the first session after a read-only variable: %q", got)
	}
	// The next user's pooled workspace has none of it.
	if _, err := m.Create(ctx, CreateRequest{Name: "e"}); err != nil {
		t.Fatal(err)
	}
	if got := out(t, m, "e", "default", "echo [$MINE$TOKEN]"); got != "[]\n" {
		t.Fatalf("the next pooled workspace has the last one's env: %q", got)
	}
	full()
	// A name already taken is refused before a pooled workspace is taken.
	taken = m.poolTaken.Load()
	if _, err := m.Create(ctx, CreateRequest{Name: "a"}); !errors.Is(err, ErrExists) && Kind(err) != ErrConflict {
		t.Fatalf("a create of a taken name: %v", err)
	}
	if m.poolTaken.Load() != taken || m.Pool().Ready != 6 {
		t.Fatalf("a create of a taken name cost a pooled workspace: %+v", m.Pool())
	}
	if got := eng.maxCreating.Load(); got > poolFillers {
		t.Fatalf("%d creates were under way at once while the pool refilled (at most %d)", got, poolFillers)
	}
}
