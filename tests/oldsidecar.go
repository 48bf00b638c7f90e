package tests

import (
	"context"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/patina-dev/patina/internal/syncbuf"
	pclient "github.com/patina-dev/patina/sidecar/client"
)

// OldSidecar is a `patina serve` built from an earlier commit (binaryAt),
// started to make state that a newer sidecar must take over. Its answers
// are not validated against today's OpenAPI document: they are an older
// version's.
type OldSidecar struct {
	Client *pclient.Client
	cmd    *exec.Cmd
	logs   *syncbuf.Buffer
	done   chan struct{}
}

// StartOld starts the sidecar bin on stateDir with token and waits until it
// answers. It is killed when the test ends if Stop was not called.
func StartOld(t testing.TB, bin, stateDir, token string) *OldSidecar {
	t.Helper()
	o := &OldSidecar{logs: &syncbuf.Buffer{}, done: make(chan struct{})}
	o.cmd = exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--state-dir", stateDir, "--token", token)
	o.cmd.Stdout, o.cmd.Stderr = o.logs, o.logs
	if err := o.cmd.Start(); err != nil {
		t.Fatalf("start the old sidecar: %v", err)
	}
	go func() { _ = o.cmd.Wait(); close(o.done) }()
	t.Cleanup(func() { _ = o.cmd.Process.Kill(); <-o.done })
	WaitFor(t, "the old sidecar", time.Minute, func() bool {
		h := &Harness{StateDir: stateDir}
		if addr := h.discoveredAddr(); addr != "" {
			c := pclient.New(addr, token, nil)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			if c.Health(ctx) == nil {
				o.Client = c
				return true
			}
		}
		return false
	})
	return o
}

// Logs is what the old sidecar has printed so far.
func (o *OldSidecar) Logs() string { return o.logs.String() }

// Stop ends the old sidecar as an upgrade would (SIGTERM) and waits for it,
// at most 30 s.
func (o *OldSidecar) Stop(t testing.TB) {
	t.Helper()
	_ = o.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-o.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the old sidecar did not stop within 30 s of SIGTERM:\n%s", o.Logs())
	}
}
