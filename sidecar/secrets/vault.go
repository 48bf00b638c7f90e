package secrets

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/patina-dev/patina/sidecar/egress"
)

// Config configures a Vault. Zero values take the defaults noted.
type Config struct {
	// StateDir holds secrets.json and the CA (ca/). Required.
	StateDir string
	// Roots verify the real servers' certificates (nil: the system's,
	// which honour SSL_CERT_FILE and SSL_CERT_DIR in the sidecar's
	// environment).
	Roots *x509.CertPool
	// HandshakeTimeout bounds each TLS handshake, with a workspace's
	// client and with a server (10 s).
	HandshakeTimeout time.Duration
	// Redactor is told every secret's value (default: a new one).
	Redactor *Redactor
	// MaxConns bounds the connections to secrets' hosts a workspace has
	// open through the Vault at once (32): more are closed at once.
	MaxConns int
	Logger   *slog.Logger
	// Now is the clock (time.Now).
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = 10 * time.Second
	}
	if c.MaxConns == 0 {
		c.MaxConns = 32
	}
	if c.Redactor == nil {
		c.Redactor = NewRedactor()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Grant is a secret held by a workspace, and the placeholder that stands
// for its value there.
type Grant struct {
	Name        string `json:"name"`
	Placeholder string `json:"placeholder"`
}

// Vault keeps the secrets, the CA and which workspace holds which secret;
// it is the egress proxy's TLSHook (intercept.go).
type Vault struct {
	cfg   Config
	log   *slog.Logger
	store *store
	ca    *ca

	mu     sync.RWMutex
	grants map[string][]Grant // by workspace id
	open   map[string]int     // intercepted connections, by workspace id
}

var _ egress.TLSHook = (*Vault)(nil)

// Open reads the secrets and the CA of the state directory (making the CA
// on first use).
func Open(cfg Config) (*Vault, error) {
	cfg = cfg.withDefaults()
	if cfg.StateDir == "" {
		return nil, fmt.Errorf("secrets: %w: a state directory is required", ErrInvalid)
	}
	st, err := openStore(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	c, err := loadCA(cfg.StateDir, cfg.Now())
	if err != nil {
		return nil, err
	}
	v := &Vault{cfg: cfg, log: cfg.Logger.With("component", "secrets"), store: st, ca: c, grants: map[string][]Grant{}, open: map[string]int{}}
	for _, s := range st.all() {
		cfg.Redactor.Hide("secret:"+s.Name, secretValues(s))
	}
	return v, nil
}

// Redactor is the Redactor the Vault tells its values.
func (v *Vault) Redactor() *Redactor { return v.cfg.Redactor }

// Set makes or replaces a secret. Workspaces that hold it use the new
// value from their next request.
func (v *Vault) Set(req SetRequest) (Info, error) {
	s, err := req.parse(v.cfg.Now())
	if err != nil {
		return Info{}, err
	}
	// Hidden before it is stored: no moment when a log could show it.
	v.cfg.Redactor.Hide("secret:"+s.Name, secretValues(s))
	err = v.store.change(func(m map[string]Secret) error {
		if _, ok := m[s.Name]; !ok && len(m) >= maxSecrets {
			return fmt.Errorf("%w: at most %d secrets", ErrInvalid, maxSecrets)
		}
		m[s.Name] = s
		return nil
	})
	if err != nil {
		if old, ok := v.store.get(s.Name); ok {
			v.cfg.Redactor.Hide("secret:"+s.Name, secretValues(old))
		} else {
			v.cfg.Redactor.Hide("secret:"+s.Name, nil)
		}
		return Info{}, err
	}
	v.log.Info("secret set", "secret", s.Name, "hosts", s.Hosts, "header", s.Header)
	return s.info(), nil
}

// List describes every secret, by name.
func (v *Vault) List() []Info {
	all := v.store.all()
	out := make([]Info, len(all))
	for i, s := range all {
		out[i] = s.info()
	}
	return out
}

// Get describes one secret.
func (v *Vault) Get(name string) (Info, error) {
	s, ok := v.store.get(name)
	if !ok {
		return Info{}, fmt.Errorf("%w: %q (patina secret ls lists them)", ErrNotFound, name)
	}
	return s.info(), nil
}

// Delete removes a secret: workspaces that hold it get nothing more for
// it (their placeholder stays a placeholder).
func (v *Vault) Delete(name string) error {
	err := v.store.change(func(m map[string]Secret) error {
		if _, ok := m[name]; !ok {
			return fmt.Errorf("%w: %q", ErrNotFound, name)
		}
		delete(m, name)
		return nil
	})
	if err != nil {
		return err
	}
	v.cfg.Redactor.Hide("secret:"+name, nil)
	v.log.Info("secret deleted", "secret", name)
	return nil
}

// NewPlaceholder makes a placeholder: what a workspace sees for a secret's
// value. It is random, so that it means nothing outside its workspace.
func NewPlaceholder() string {
	b := make([]byte, 20)
	_, _ = rand.Read(b)
	return "patina-placeholder-" + hex.EncodeToString(b)
}

// Grant says which secrets workspace id holds (none: Forget).
func (v *Vault) Grant(id string, grants []Grant) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(grants) == 0 {
		delete(v.grants, id)
		return
	}
	v.grants[id] = slices.Clone(grants)
}

// Forget drops a workspace's grants (it was deleted).
func (v *Vault) Forget(id string) { v.Grant(id, nil) }

// take counts an intercepted connection of workspace id in, within the
// bound.
func (v *Vault) take(id string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.open[id] >= v.cfg.MaxConns {
		return false
	}
	v.open[id]++
	return true
}

func (v *Vault) release(id string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.open[id]--; v.open[id] <= 0 {
		delete(v.open, id)
	}
}

// CACert is the CA's certificate (PEM), which workspaces granted secrets
// trust.
func (v *Vault) CACert() []byte { return v.ca.pem() }

// match is a secret that applies to a request, and its placeholder there.
type match struct {
	Secret
	placeholder string
}

// matching are the secrets workspace id holds for host, as they are now
// (sorted by name: of two secrets setting one header, the later name
// wins).
func (v *Vault) matching(id, host string) []match {
	v.mu.RLock()
	grants := v.grants[id]
	v.mu.RUnlock()
	var out []match
	for _, g := range grants {
		if s, ok := v.store.get(g.Name); ok && s.matches(host) {
			out = append(out, match{Secret: s, placeholder: g.Placeholder})
		}
	}
	slices.SortFunc(out, func(a, b match) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}
