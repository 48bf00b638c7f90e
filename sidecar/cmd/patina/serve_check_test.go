package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckNotRunning(t *testing.T) {
	f := newFakeSidecar(t)
	addr := strings.TrimPrefix(f.srv.URL, "http://")
	ctx := context.Background()

	// A live process answering at the address: refused.
	mustWrite(t, filepath.Join(f.stateDir, discoveryFile), fmt.Sprintf(`{"addr":%q,"pid":%d}`, addr, os.Getpid()))
	err := checkNotRunning(ctx, f.stateDir)
	if err == nil || !strings.Contains(err.Error(), "already serves") {
		t.Errorf("exp an error for a running sidecar, got %v", err)
	}
	// Stale files are fine: a dead pid, nobody listening, no file, junk.
	for name, content := range map[string]string{
		"dead pid":    fmt.Sprintf(`{"addr":%q,"pid":%d}`, addr, 1<<22+1),
		"no listener": fmt.Sprintf(`{"addr":"127.0.0.1:1","pid":%d}`, os.Getpid()),
		"junk":        `{`,
	} {
		mustWrite(t, filepath.Join(f.stateDir, discoveryFile), content)
		if err := checkNotRunning(ctx, f.stateDir); err != nil {
			t.Errorf("%s: exp no error, got %v", name, err)
		}
	}
	if err := checkNotRunning(ctx, t.TempDir()); err != nil {
		t.Errorf("no sidecar.json: exp no error, got %v", err)
	}
}
