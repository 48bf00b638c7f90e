package agent

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/patina-dev/patina/sidecar/agent/internal/agenttest"
	"github.com/patina-dev/patina/sidecar/agent/wire"
)

// A client with Setup tells every agent it connects to (a new one too)
// the environment of its new shells and the trust store to write, before
// any other call.
func TestSetupEnvAndTrust(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	ca := agenttest.CAPEM(t)
	var calls atomic.Int32
	req := &wire.SetupRequest{
		Env: map[string]string{"GH": "patina-placeholder-1", "TOKEN": "s3cret value"},
		Trust: &wire.TrustSetup{CA: ca, CAPath: filepath.Join(dir, "tls", "ca.pem"), BundlePath: filepath.Join(dir, "tls", "bundle.pem"),
			Env: map[string]string{"SSL_CERT_FILE": filepath.Join(dir, "tls", "bundle.pem")}},
	}
	c := NewClient(ClientConfig{WorkspaceID: "ws1", Token: "tok", Logger: f.log,
		Setup: func() *wire.SetupRequest { calls.Add(1); return req },
		Dial: func(ctx context.Context) (net.Conn, error) {
			f.mu.Lock()
			addr := f.addr
			f.mu.Unlock()
			var d net.Dialer
			return d.DialContext(ctx, "unix", addr)
		}})
	t.Cleanup(c.Close)
	ctx := context.Background()
	run := func(sid, cmd string) string {
		t.Helper()
		res, err := c.Exec(ctx, wire.ExecRequest{Session: sid, Command: cmd, Ensure: true, Cwd: f.work}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return string(res.Stdout.Data)
	}
	if got := run("a", `echo "$GH|$TOKEN|$SSL_CERT_FILE"`); got != "patina-placeholder-1|s3cret value|"+req.Trust.BundlePath+"\n" {
		t.Fatalf("exp the setup's environment in a new session, got %q", got)
	}
	bundle, err := os.ReadFile(req.Trust.BundlePath)
	if err != nil || !strings.HasSuffix(string(bundle), ca) {
		t.Fatalf("exp the bundle to end with the CA, got %v:\n%s", err, bundle)
	}
	if b, _ := os.ReadFile(req.Trust.CAPath); string(b) != ca {
		t.Fatalf("exp the CA alone at CAPath, got %q", b)
	}
	// A new agent (the old one died) is told again, before the next call.
	f.stop()
	f.start(t, filepath.Dir(f.work))
	req = &wire.SetupRequest{Env: map[string]string{"GH": "patina-placeholder-2"}}
	if got := run("b", `echo "$GH|${TOKEN-unset}"`); got != "patina-placeholder-2|unset\n" {
		t.Fatalf("exp the new agent's setup in a new session, got %q", got)
	}
	if calls.Load() < 2 {
		t.Fatalf("exp a setup per connection, got %d", calls.Load())
	}
}
