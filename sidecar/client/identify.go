package client

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
)

// A client sends its token to whatever listens at the address it was
// given: after a sidecar dies, any local user can listen on its port and
// collect the token of the next CLI call. So a client first asks the
// server to prove it holds the token, without sending it: GET
// /v1/identify?nonce=N answers {"proof": hex HMAC-SHA256(token,
// IdentifyContext+N)}; only a server that knows the token can make it.

// IdentifyPath is the route of the proof; it needs no token.
const IdentifyPath = "/v1/identify"

// IdentifyContext is what the proof's HMAC covers before the nonce.
const IdentifyContext = "patina identify v1 "

// Identity is GET /v1/identify's answer.
type Identity struct {
	Proof string `json:"proof"`
}

// IdentityProof is the proof of token for nonce.
func IdentityProof(token, nonce string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte(IdentifyContext + nonce))
	return hex.EncodeToString(m.Sum(nil))
}

// ErrNotSidecar: the server at the client's address could not prove it
// holds the token (another program on that port, or another sidecar), so
// the token was not sent to it.
var ErrNotSidecar = errors.New("not the sidecar this token belongs to")

// verifying is a transport that, before the first request that carries
// the token, checks that the server holds it (Verify).
type verifying struct {
	base  http.RoundTripper
	token string

	mu sync.Mutex
	ok map[string]bool // by host: proven
}

// Verifying returns a transport over base (nil: http.DefaultTransport)
// that sends token to a server only once the server has proved it holds
// it. A client whose token came from a file, and whose address may be
// taken over by another program, should use it.
func Verifying(base http.RoundTripper, token string) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &verifying{base: base, token: token, ok: map[string]bool{}}
}

func (v *verifying) RoundTrip(r *http.Request) (*http.Response, error) {
	if v.token != "" && r.Header.Get("Authorization") != "" {
		if err := v.verify(r.Context(), r.URL); err != nil {
			if r.Body != nil {
				r.Body.Close()
			}
			return nil, err
		}
	}
	return v.base.RoundTrip(r)
}

// verify asks the server at u's host for its proof, once per host (a
// failure is asked again next time).
func (v *verifying) verify(ctx context.Context, u *url.URL) error {
	v.mu.Lock()
	done := v.ok[u.Host]
	v.mu.Unlock()
	if done {
		return nil
	}
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	nonce := hex.EncodeToString(b)
	q := url.URL{Scheme: u.Scheme, Host: u.Host, Path: IdentifyPath, RawQuery: "nonce=" + nonce}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, q.String(), nil)
	if err != nil {
		return err
	}
	resp, err := v.base.RoundTrip(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var id Identity
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &id) != nil ||
		!hmac.Equal([]byte(id.Proof), []byte(IdentityProof(v.token, nonce))) {
		return fmt.Errorf("%s is %w: it did not prove it holds the token (answer %d), so the token was not sent; another program may listen on that port (is patina serve running, and as new as this patina?)", u.Host, ErrNotSidecar, resp.StatusCode)
	}
	v.mu.Lock()
	v.ok[u.Host] = true
	v.mu.Unlock()
	return nil
}
