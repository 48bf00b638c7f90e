package workspace

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"
)

// TestIdleReaperNotStalled: a workspace whose stop hangs (its engine call
// waits on its container) does not hold up the idle stop of the others.
func TestIdleReaperNotStalled(t *testing.T) {
	eng := newFakeEngine(t)
	m, err := New(Config{StateDir: t.TempDir(), DefaultImage: "img", AdoptWait: 2 * time.Second, InterruptGrace: 200 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler), IdleCheck: 50 * time.Millisecond}, eng, fakeImages{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	<-m.Adopt()
	ctx := context.Background()
	// The stuck one is idle first: the reaper meets it before the others.
	stuck, err := m.Create(ctx, CreateRequest{Name: "stuck", IdleStop: "1s"})
	if err != nil {
		t.Fatal(err)
	}
	eng.mu.Lock()
	eng.blockStop[stuck.ID] = true
	eng.mu.Unlock()
	var others []string
	for i := range 3 {
		name := fmt.Sprintf("other-%d", i)
		if _, err := m.Create(ctx, CreateRequest{Name: name, IdleStop: "2s"}); err != nil {
			t.Fatal(err)
		}
		others = append(others, name)
	}
	deadline := time.Now().Add(30 * time.Second) // a stuck stop waits 2 minutes
	for _, name := range others {
		for {
			inf, err := m.Get(name)
			if err != nil {
				t.Fatal(err)
			}
			if inf.Status == StatusStopped {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s was not stopped by idle stop while %s's stop hung: %+v", name, stuck.Name, inf)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if inf, err := m.Get("stuck"); err != nil || inf.Status == StatusStopped {
		t.Fatalf("the stuck workspace: %+v, %v (its stop hangs)", inf, err)
	}
}
