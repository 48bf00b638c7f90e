package workspace

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/patina-dev/patina/sidecar/egress"
	"github.com/patina-dev/patina/sidecar/secrets"
)

// openNet is a network boundary that enforces every policy (the proxy
// itself is the egress package's, tested there and end to end).
type openNet struct{}

func (openNet) Enforced() string                                           { return "" }
func (openNet) Apply(context.Context, string, string, egress.Policy) error { return nil }
func (openNet) Forget(string)                                              {}

func newSecretsManager(t *testing.T, eng *fakeEngine, stateDir string, vault *secrets.Vault) *Manager {
	t.Helper()
	m, err := New(Config{StateDir: stateDir, DefaultImage: "img", AdoptWait: 2 * time.Second, InterruptGrace: 200 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler), Network: openNet{}, Secrets: vault, Redactor: vault.Redactor(),
		TrustDir: filepath.Join(stateDir, "container-tls")}, eng, fakeImages{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

const secretEnvValue = "s3cret-env-value"

// A workspace granted a secret holds a placeholder and patina's CA, never
// the value; its secret environment is in its sessions, not in its
// container's configuration, and shown by name only; both outlive a
// sidecar restart; a delete forgets the grant.
func TestSecretsGrant(t *testing.T) {
	eng := newFakeEngine(t)
	dir := t.TempDir()
	vaultDir := t.TempDir()
	vault, err := secrets.Open(secrets.Config{StateDir: vaultDir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vault.Set(secrets.SetRequest{Name: "GH", Hosts: []string{"api.test"}, Header: "Authorization: Bearer real-value-1234"}); err != nil {
		t.Fatal(err)
	}
	m := newSecretsManager(t, eng, dir, vault)
	ctx := context.Background()
	for name, req := range map[string]CreateRequest{
		"unknown secret":          {Secrets: []string{"NOPE"}},
		"twice":                   {Secrets: []string{"GH", "GH"}},
		"secret named like env":   {Secrets: []string{"GH"}, Env: map[string]string{"GH": "x"}},
		"secret_env is env":       {SecretEnv: map[string]string{"A": "x"}, Env: map[string]string{"A": "y"}},
		"secret_env is a secret":  {Secrets: []string{"GH"}, SecretEnv: map[string]string{"GH": "x"}},
		"secret_env is the CA's":  {SecretEnv: map[string]string{"SSL_CERT_FILE": "/x"}},
		"secret_env bad name":     {SecretEnv: map[string]string{"1A": "x"}},
		"secret_env NUL in value": {SecretEnv: map[string]string{"A": "a\x00b"}},
	} {
		if _, err := m.Create(ctx, req); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: exp ErrInvalid, got %v", name, err)
		}
	}
	ws, err := m.Create(ctx, CreateRequest{Name: "sec", Secrets: []string{"GH"},
		SecretEnv: map[string]string{"TOKEN": secretEnvValue}, Env: map[string]string{"PLAIN": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ws.Secrets, []string{"GH"}) || !slices.Equal(ws.SecretEnv, []string{"TOKEN"}) || len(ws.Env) != 1 {
		t.Fatalf("exp the names only, got secrets %v secret_env %v env %v", ws.Secrets, ws.SecretEnv, ws.Env)
	}
	spec := eng.container(t, ws.ID).spec
	for k, v := range spec.Env {
		if k == "TOKEN" || k == "GH" || strings.Contains(v, secretEnvValue) {
			t.Fatalf("the container's configuration holds %s=%s", k, v)
		}
	}
	if !vault.Wants(ws.ID) {
		t.Fatal("the proxy was not told of the grant")
	}
	ca, bundle := secrets.TrustFiles(filepath.Join(dir, "container-tls"))
	// (The fake engine's agent runs on the host: the container's own
	// environment, PLAIN, is not in it.)
	got := out(t, m, "sec", "default", `echo "$GH|$TOKEN|$SSL_CERT_FILE|$NODE_EXTRA_CA_CERTS"`)
	parts := strings.Split(strings.TrimSpace(got), "|")
	if len(parts) != 4 || !strings.HasPrefix(parts[0], "patina-placeholder-") || parts[1] != secretEnvValue || parts[2] != bundle || parts[3] != ca {
		t.Fatalf("exp a placeholder, the secret env, the bundle and the CA, got %q", got)
	}
	placeholder := parts[0]
	if b, err := os.ReadFile(bundle); err != nil || !strings.HasSuffix(string(b), string(vault.CACert())) {
		t.Fatalf("exp the bundle to end with patina's CA: %v", err)
	}
	// The event log shows the command without the value.
	out(t, m, "sec", "default", "echo "+secretEnvValue+" >/dev/null")
	evs, err := m.Log(ctx, "sec")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range evs {
		if strings.Contains(e.Message, secretEnvValue) {
			t.Fatalf("the event log holds the secret value: %+v", e)
		}
		found = found || strings.Contains(e.Message, "echo "+secrets.Redacted)
	}
	if !found {
		t.Fatalf("exp the command logged with the value redacted, got %+v", evs)
	}
	if fi, err := os.Stat(filepath.Join(dir, "workspaces", ws.ID, metaFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("exp the record holding the secret env 0600: %v %v", fi, err)
	}

	// A sidecar restart: the grant, the placeholder and the secret env stay.
	m.Close()
	vault2, err := secrets.Open(secrets.Config{StateDir: vaultDir})
	if err != nil {
		t.Fatal(err)
	}
	m2 := newSecretsManager(t, eng, dir, vault2)
	select {
	case <-m2.Adopt():
	case <-time.After(10 * time.Second):
		t.Fatal("adoption did not finish")
	}
	if !vault2.Wants(ws.ID) {
		t.Fatal("the grant did not survive the restart")
	}
	if _, err := m2.CreateSession(ctx, "sec", CreateSessionRequest{ID: "new"}); err != nil {
		t.Fatal(err)
	}
	if got := out(t, m2, "sec", "new", `echo "$GH|$TOKEN"`); got != placeholder+"|"+secretEnvValue+"\n" {
		t.Fatalf("after a restart, a new session: exp the same placeholder and secret env, got %q", got)
	}
	if err := m2.Delete(ctx, "sec", false); err != nil {
		t.Fatal(err)
	}
	if vault2.Wants(ws.ID) {
		t.Fatal("a deleted workspace still holds its secret")
	}
}
