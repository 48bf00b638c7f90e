package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"sync"
	"time"
)

// Bounds of the key store: every map here has a cap, and entries expire.
const (
	// MaxKeys is the most browser keys held at once; the oldest goes first.
	MaxKeys = 64
	// MaxCodes is the most unused one-time codes held at once.
	MaxCodes = 16
	// DefaultKeyTTL is how long a browser key lives (a working day).
	DefaultKeyTTL = 12 * time.Hour
	// DefaultCodeTTL is how long a one-time code from `patina ui` may wait
	// to be used.
	DefaultCodeTTL = 2 * time.Minute
)

// ErrRefused is a sign-in with a wrong or used token or code.
var ErrRefused = errors.New("the token or code is wrong, used or expired")

// Keys holds one-time codes and browser keys, each key with its preview
// secret. Safe for concurrent use; no I/O under its lock.
type Keys struct {
	keyTTL, codeTTL time.Duration
	now             func() time.Time

	mu    sync.Mutex
	seq   uint64           // entries made so far: the order of making
	keys  map[string]entry // key -> its expiry and preview secret
	codes map[string]entry // code -> its expiry
}

// entry is a key's or code's expiry and its place in the order of making
// (two made in one instant expire together: the older goes first); a
// key's also holds its preview secret.
type entry struct {
	expires time.Time
	seq     uint64
	preview string
}

// Grant is what a sign-in gets. Key is the page's bearer for /v1; Preview
// is the value of the preview cookie, which a browser also sends to every
// other port of the sidecar's host (a workspace's forward among them), so
// it opens previews only and is never a bearer.
type Grant struct {
	Key, Preview string
	Expires      time.Time
}

// NewKeys makes an empty store (zero TTLs take the defaults).
func NewKeys(keyTTL, codeTTL time.Duration) *Keys {
	if keyTTL <= 0 {
		keyTTL = DefaultKeyTTL
	}
	if codeTTL <= 0 {
		codeTTL = DefaultCodeTTL
	}
	return &Keys{keyTTL: keyTTL, codeTTL: codeTTL, now: time.Now,
		keys: map[string]entry{}, codes: map[string]entry{}}
}

func random() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// NewCode returns a one-time code that Exchange turns into a key once.
func (k *Keys) NewCode() (code string, expires time.Time) {
	code = random()
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	expires = now.Add(k.codeTTL)
	prune(k.codes, now, MaxCodes-1)
	k.seq++
	k.codes[code] = entry{expires: expires, seq: k.seq}
	return code, expires
}

// Exchange turns a valid one-time code into a new browser key (the code is
// used up). Codes are compared in constant time.
func (k *Keys) Exchange(code string) (Grant, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	for c, e := range k.codes {
		if subtle.ConstantTimeCompare([]byte(c), []byte(code)) == 1 {
			delete(k.codes, c)
			if now.After(e.expires) {
				return Grant{}, ErrRefused
			}
			return k.newKeyLocked(now), nil
		}
	}
	return Grant{}, ErrRefused
}

// NewKey returns a new browser key (for a sign-in with the token).
func (k *Keys) NewKey() Grant {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.newKeyLocked(k.now())
}

func (k *Keys) newKeyLocked(now time.Time) Grant {
	g := Grant{Key: random(), Preview: random(), Expires: now.Add(k.keyTTL)}
	prune(k.keys, now, MaxKeys-1)
	k.seq++
	k.keys[g.Key] = entry{g.Expires, k.seq, g.Preview}
	return g
}

// Valid says whether key is a live browser key (a preview secret is not).
func (k *Keys) Valid(key string) bool {
	if key == "" {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for c, e := range k.keys {
		if subtle.ConstantTimeCompare([]byte(c), []byte(key)) == 1 {
			return !k.now().After(e.expires)
		}
	}
	return false
}

// ValidPreview says whether secret is the preview secret of a live browser
// key (a key is not).
func (k *Keys) ValidPreview(secret string) bool {
	if secret == "" {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	ok := false
	for _, e := range k.keys {
		if subtle.ConstantTimeCompare([]byte(e.preview), []byte(secret)) == 1 && !k.now().After(e.expires) {
			ok = true
		}
	}
	return ok
}

// Revoke ends a browser key and its preview secret (sign-out).
func (k *Keys) Revoke(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.keys, key)
}

// prune drops expired entries, then the soonest to expire (of those, the
// oldest) until at most keep remain.
func prune(m map[string]entry, now time.Time, keep int) {
	for c, e := range m {
		if now.After(e.expires) {
			delete(m, c)
		}
	}
	for len(m) > keep {
		var oldest string
		var at entry
		for c, e := range m {
			if oldest == "" || e.expires.Before(at.expires) || e.expires.Equal(at.expires) && e.seq < at.seq {
				oldest, at = c, e
			}
		}
		delete(m, oldest)
	}
}
