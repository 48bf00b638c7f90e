package workspace

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/sidecar/agent/wire"
	"github.com/patina-dev/patina/sidecar/secrets"
)

// Secrets holds the credentials workspaces may be granted (secrets.Vault):
// the egress proxy sets them on the requests of the workspaces that hold
// them.
type Secrets interface {
	Get(name string) (secrets.Info, error)
	// Grant says which secrets a workspace holds (none: it is gone).
	Grant(workspaceID string, grants []secrets.Grant)
	// CACert is the CA a workspace granted secrets trusts (PEM).
	CACert() []byte
}

// maxGrants bounds the secrets one workspace holds.
const maxGrants = 32

// checkSecrets checks a create request's secrets and secret_env: the
// secrets exist (and can be used here), every name is a variable a shell
// can have and is given once.
func (m *Manager) checkSecrets(names []string, secretEnv, env map[string]string) error {
	taken := func(k string) string {
		switch {
		case hasKey(env, k):
			return "env"
		case slices.Contains(secrets.TrustEnvNames, k):
			return "patina's CA bundle"
		case strings.HasPrefix(k, "PATINA_"):
			return "patina"
		}
		return ""
	}
	for k, v := range secretEnv {
		if !session.ValidEnvName(k) {
			return fmt.Errorf("%w: secret_env: %q is not a valid variable name", ErrInvalid, k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("%w: secret_env: the value of %s contains a NUL byte", ErrInvalid, k)
		}
		if by := taken(k); by != "" {
			return fmt.Errorf("%w: secret_env: %s is set by %s already", ErrInvalid, k, by)
		}
	}
	if len(names) == 0 {
		return nil
	}
	if len(names) > maxGrants {
		return fmt.Errorf("%w: secrets: at most %d", ErrInvalid, maxGrants)
	}
	if why := m.cfg.Network.Enforced(); why != "" {
		return fmt.Errorf("%w: secrets are set by the sidecar's egress proxy, which this sidecar cannot run (%s)", ErrUnsupported, why)
	}
	for i, n := range names {
		if slices.Contains(names[:i], n) {
			return fmt.Errorf("%w: secrets: %s is named twice", ErrInvalid, n)
		}
		if _, err := m.cfg.Secrets.Get(n); err != nil {
			if errors.Is(err, secrets.ErrNotFound) {
				return fmt.Errorf("%w: secrets: there is no secret %s (patina secret set %s --host … --header …)", ErrInvalid, n, n)
			}
			return fmt.Errorf("%w: secrets: %v", ErrInvalid, err)
		}
		if by := taken(n); by != "" {
			return fmt.Errorf("%w: secrets: the variable %s is set by %s already", ErrInvalid, n, by)
		}
		if hasKey(secretEnv, n) {
			return fmt.Errorf("%w: secrets: the variable %s is set by secret_env already", ErrInvalid, n)
		}
	}
	return nil
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

// grantsFor gives each secret named a new placeholder.
func grantsFor(names []string) []secrets.Grant {
	out := make([]secrets.Grant, len(names))
	for i, n := range names {
		out[i] = secrets.Grant{Name: n, Placeholder: secrets.NewPlaceholder()}
	}
	return out
}

// agentSetup is what the workspace's agent is told on each connection:
// its secret environment (and, for one taken from the warm pool, its
// environment), its placeholders and, when it holds secrets,
// patina's CA for its trust store (nil: nothing to tell).
func (w *workspace) agentSetup() *wire.SetupRequest {
	w.mu.Lock()
	grants, secretEnv := w.meta.Secrets, w.meta.SecretEnv
	var plain map[string]string
	if w.meta.EnvBySetup {
		plain = w.meta.Env
	}
	w.mu.Unlock()
	if len(grants) == 0 && len(secretEnv) == 0 && len(plain) == 0 {
		return nil
	}
	env := maps.Clone(plain)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, secretEnv)
	for _, g := range grants {
		env[g.Name] = g.Placeholder
	}
	req := &wire.SetupRequest{Env: env}
	if len(grants) > 0 {
		dir := w.m.cfg.TrustDir
		ca, bundle := secrets.TrustFiles(dir)
		req.Trust = &wire.TrustSetup{
			CA:         string(w.m.cfg.Secrets.CACert()),
			CAPath:     ca,
			BundlePath: bundle,
			Env:        secrets.TrustEnv(dir),
		}
	}
	return req
}

// holdSecrets tells the proxy which secrets the workspace holds, and the
// redactor its secret values.
func (m *Manager) holdSecrets(md meta) {
	m.cfg.Secrets.Grant(md.ID, md.Secrets)
	m.cfg.Redactor.Hide("workspace:"+md.ID, slices.Collect(maps.Values(md.SecretEnv)))
}

// dropSecrets forgets them (the workspace was deleted).
func (m *Manager) dropSecrets(id string) {
	m.cfg.Secrets.Grant(id, nil)
	m.cfg.Redactor.Hide("workspace:"+id, nil)
}

// noSecrets is the Secrets of a sidecar that keeps none.
type noSecrets struct{}

func (noSecrets) Get(name string) (secrets.Info, error) {
	return secrets.Info{}, fmt.Errorf("%w: %s: this sidecar keeps no secrets", secrets.ErrNotFound, name)
}
func (noSecrets) Grant(string, []secrets.Grant) {}
func (noSecrets) CACert() []byte                { return nil }
