package secrets

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/patina-dev/patina/sidecar/egress"
)

// Limits of a secret.
const (
	maxHosts    = 16
	maxValueLen = 8 << 10
	maxSecrets  = 1024
)

// Secret is one credential: the header the proxy sets on requests to its
// hosts. Value never leaves the sidecar but toward those hosts.
type Secret struct {
	Name string `json:"name"`
	// Hosts are DNS names ("api.github.com") or wildcards ("*.github.com":
	// every name below github.com), lower case.
	Hosts []string `json:"hosts"`
	// Header is the header's name (canonical form), Value its value.
	Header    string    `json:"header"`
	Value     string    `json:"value"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Info is what may be shown of a secret: never its value.
type Info struct {
	Name      string
	Hosts     []string
	Header    string
	UpdatedAt time.Time
}

func (s Secret) info() Info {
	return Info{Name: s.Name, Hosts: slices.Clone(s.Hosts), Header: s.Header, UpdatedAt: s.UpdatedAt}
}

// matches reports whether the secret is for host (lower case, no trailing
// dot).
func (s Secret) matches(host string) bool {
	for _, h := range s.Hosts {
		if suffix, ok := strings.CutPrefix(h, "*"); ok {
			if len(host) > len(suffix) && strings.HasSuffix(host, suffix) {
				return true
			}
		} else if h == host {
			return true
		}
	}
	return false
}

// SetRequest makes or replaces a secret.
type SetRequest struct {
	Name  string
	Hosts []string
	// Header is "Name: value" ("Authorization: Bearer …").
	Header string
}

var nameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// ValidateName checks a secret's name: the name of the environment
// variable that holds its placeholder in a workspace.
func ValidateName(name string) error {
	switch {
	case !nameRE.MatchString(name):
		return fmt.Errorf("%w: name %q: a secret is named like an environment variable (letters, digits and _, not starting with a digit, at most 64)", ErrInvalid, name)
	case strings.HasPrefix(strings.ToUpper(name), "PATINA_"):
		return fmt.Errorf("%w: name %q: names starting with PATINA_ are patina's own", ErrInvalid, name)
	case slices.Contains(TrustEnvNames, name):
		return fmt.Errorf("%w: name %q: patina sets that variable in workspaces (its CA bundle)", ErrInvalid, name)
	}
	return nil
}

// hopHeaders are headers a secret may not be: they frame the request or
// the connection, not the application's credentials.
var hopHeaders = []string{"Connection", "Content-Length", "Host", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// parse checks a request and makes the secret.
func (r SetRequest) parse(now time.Time) (Secret, error) {
	if err := ValidateName(r.Name); err != nil {
		return Secret{}, err
	}
	if len(r.Hosts) == 0 || len(r.Hosts) > maxHosts {
		return Secret{}, fmt.Errorf("%w: a secret needs 1 to %d hosts (--host api.github.com)", ErrInvalid, maxHosts)
	}
	s := Secret{Name: r.Name, UpdatedAt: now.UTC()}
	for _, h := range r.Hosts {
		rule, err := egress.ParseRule(h)
		if err != nil {
			return Secret{}, fmt.Errorf("%w: host %q: %v", ErrInvalid, h, strings.TrimPrefix(err.Error(), egress.ErrInvalid.Error()+": "))
		}
		if rule.Name == "" || rule.Port != 0 {
			return Secret{}, fmt.Errorf("%w: host %q: a secret's host is a DNS name or *.domain, without a port (TLS names the host, not the port)", ErrInvalid, h)
		}
		if !slices.Contains(s.Hosts, rule.Name) {
			s.Hosts = append(s.Hosts, rule.Name)
		}
	}
	k, v, ok := strings.Cut(r.Header, ":")
	k, v = strings.TrimSpace(k), strings.TrimSpace(v)
	switch {
	case !ok || k == "":
		return Secret{}, fmt.Errorf("%w: header: want \"Name: value\" (\"Authorization: Bearer …\")", ErrInvalid)
	case !httpguts.ValidHeaderFieldName(k):
		return Secret{}, fmt.Errorf("%w: header: %q is not a header name", ErrInvalid, k)
	case v == "":
		return Secret{}, fmt.Errorf("%w: header %s: the value is empty", ErrInvalid, k)
	case len(v) > maxValueLen:
		return Secret{}, fmt.Errorf("%w: header %s: the value is longer than %d bytes", ErrInvalid, k, maxValueLen)
	case !httpguts.ValidHeaderFieldValue(v):
		return Secret{}, fmt.Errorf("%w: header %s: the value holds a control character", ErrInvalid, k)
	}
	s.Header = canonical(k)
	if slices.Contains(hopHeaders, s.Header) {
		return Secret{}, fmt.Errorf("%w: header %s frames the request, it cannot be a secret", ErrInvalid, s.Header)
	}
	s.Value = v
	return s, nil
}

// canonical is a header name in Go's canonical form.
func canonical(k string) string {
	b := []byte(strings.ToLower(k))
	up := true
	for i, c := range b {
		if up && c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
		up = c == '-'
	}
	return string(b)
}

// store is the secrets, in memory and in <dir>/secrets.json (0600).
type store struct {
	path string
	// wmu serialises changes (and their file writes); mu guards byName,
	// held only to read or swap it.
	wmu    sync.Mutex
	mu     sync.RWMutex
	byName map[string]Secret
}

// storeFile is secrets.json.
type storeFile struct {
	Secrets []Secret `json:"secrets"`
}

func openStore(dir string) (*store, error) {
	s := &store{path: filepath.Join(dir, "secrets.json"), byName: map[string]Secret{}}
	b, err := os.ReadFile(s.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("secrets: %w", err)
	}
	var f storeFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("secrets: %s: %w", s.path, err)
	}
	for _, sec := range f.Secrets {
		s.byName[sec.Name] = sec
	}
	// Whoever made it, it holds credentials: only the sidecar's user.
	_ = os.Chmod(s.path, 0o600)
	return s, nil
}

func (s *store) get(name string) (Secret, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	sec, ok := s.byName[name]
	return sec, ok
}

func (s *store) all() []Secret {
	s.mu.RLock()
	out := make([]Secret, 0, len(s.byName))
	for _, sec := range s.byName {
		out = append(out, sec)
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b Secret) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// change applies fn to a copy of the secrets, writes them, then makes
// them current.
func (s *store) change(fn func(map[string]Secret) error) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.RLock()
	next := make(map[string]Secret, len(s.byName)+1)
	for k, v := range s.byName {
		next[k] = v
	}
	s.mu.RUnlock()
	if err := fn(next); err != nil {
		return err
	}
	f := storeFile{Secrets: make([]Secret, 0, len(next))}
	for _, v := range next {
		f.Secrets = append(f.Secrets, v)
	}
	slices.SortFunc(f.Secrets, func(a, b Secret) int { return strings.Compare(a.Name, b.Name) })
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := writePrivate(s.path, append(b, '\n')); err != nil {
		return fmt.Errorf("secrets: save: %w", err)
	}
	s.mu.Lock()
	s.byName = next
	s.mu.Unlock()
	return nil
}

// writePrivate writes a file only its owner may read, whole or not at all.
func writePrivate(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
