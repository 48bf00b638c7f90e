package bench

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"time"
)

// SelfSignedTLS is a TLS configuration with a certificate made now, for
// the test server's HTTPS (`patina agent test-server --tls`).
func SelfSignedTLS() (*tls.Config, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "patina test server"},
		DNSNames:     []string{"bench.patina.test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}, nil
}

// ClientResult is what the test client measured.
type ClientResult struct {
	Get   Latency  `json:"get"`
	Bytes Transfer `json:"bytes"`
}

// RunTestClient times samples HTTPS GETs of /hello on one keep-alive
// connection to base (an https:// URL of the test server; its
// certificate is not checked), then one GET of n bytes. It runs on the
// host (direct) and inside a workspace (`patina agent test-client`,
// through the egress proxy), so both sides measure the same way.
func RunTestClient(ctx context.Context, base string, samples int, n int64) (ClientResult, error) {
	var res ClientResult
	hc := &http.Client{Timeout: 10 * time.Minute, Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true, ServerName: "bench.patina.test"},
		MaxIdleConnsPerHost: 1, DisableCompression: true, ForceAttemptHTTP2: false,
	}}
	defer hc.CloseIdleConnections()
	get := func(path string) (int64, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if err != nil {
			return 0, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		k, err := io.Copy(io.Discard, resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		return k, err
	}
	for range 10 { // the handshake and a warm connection
		if _, err := get("/hello"); err != nil {
			return res, err
		}
	}
	lat := make([]time.Duration, 0, samples)
	for range samples {
		t0 := time.Now()
		if _, err := get("/hello"); err != nil {
			return res, err
		}
		lat = append(lat, time.Since(t0))
	}
	res.Get = summarise(lat)
	t0 := time.Now()
	k, err := get(fmt.Sprintf("/bytes?n=%d", n))
	if err != nil || k != n {
		return res, fmt.Errorf("GET %d bytes: got %d: %v", n, k, err)
	}
	res.Bytes = transfer(k, time.Since(t0))
	return res, nil
}
