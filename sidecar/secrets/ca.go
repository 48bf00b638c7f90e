package secrets

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Lifetimes of the CA and of the certificates it makes for hosts.
const (
	caLife      = 10 * 365 * 24 * time.Hour
	caRenew     = 30 * 24 * time.Hour // a CA this close to its end is replaced
	leafLife    = 7 * 24 * time.Hour
	leafRenew   = 24 * time.Hour // a cached certificate this close to its end is made again
	maxLeaves   = 4096
	clockSkew   = time.Hour
	caKeyFile   = "ca-key.pem"
	caCertFile  = "ca.pem"
	caDirectory = "ca"
)

// ca is the sidecar's CA: its key is read from <state>/ca/ca-key.pem
// (0600) and never leaves the sidecar's memory; its certificate is what
// workspaces trust. It makes a certificate for each host it terminates
// TLS for, all with one key of their own, cached.
type ca struct {
	cert    *x509.Certificate
	certPEM []byte
	key     *ecdsa.PrivateKey
	leafKey *ecdsa.PrivateKey

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// loadCA reads the CA of dir, or makes one there.
func loadCA(stateDir string, now time.Time) (*ca, error) {
	dir := filepath.Join(stateDir, caDirectory)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("secrets: CA: %w", err)
	}
	_ = os.Chmod(dir, 0o700)
	c, err := readCA(dir, now)
	if err != nil {
		if c, err = makeCA(dir, now); err != nil {
			return nil, fmt.Errorf("secrets: make the CA: %w", err)
		}
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	c.leafKey = leafKey
	c.leaves = map[string]*tls.Certificate{}
	return c, nil
}

func readCA(dir string, now time.Time) (*ca, error) {
	kb, err := os.ReadFile(filepath.Join(dir, caKeyFile))
	if err != nil {
		return nil, err
	}
	cb, err := os.ReadFile(filepath.Join(dir, caCertFile))
	if err != nil {
		return nil, err
	}
	kp, _ := pem.Decode(kb)
	cp, _ := pem.Decode(cb)
	if kp == nil || cp == nil {
		return nil, errors.New("not PEM")
	}
	key, err := x509.ParseECPrivateKey(kp.Bytes)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(cp.Bytes)
	if err != nil {
		return nil, err
	}
	pub, ok := cert.PublicKey.(*ecdsa.PublicKey)
	switch {
	case !ok || !pub.Equal(&key.PublicKey):
		return nil, errors.New("the CA's key and certificate do not match")
	case !cert.IsCA || now.Add(caRenew).After(cert.NotAfter):
		return nil, errors.New("the CA is at its end")
	}
	_ = os.Chmod(filepath.Join(dir, caKeyFile), 0o600)
	return &ca{cert: cert, certPEM: cb, key: key}, nil
}

func makeCA(dir string, now time.Time) (*ca, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	ski := sha256.Sum256(pub)
	host, _ := os.Hostname()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{Organization: []string{"patina"}, CommonName: fmt.Sprintf("patina workspace CA (%s, %x)", host, ski[:4])},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(caLife),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		SubjectKeyId:          ski[:20],
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	// The key first: a certificate without its key is made again.
	if err := writePrivate(filepath.Join(dir, caKeyFile), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})); err != nil {
		return nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := writePrivate(filepath.Join(dir, caCertFile), certPEM); err != nil {
		return nil, err
	}
	_ = os.Chmod(filepath.Join(dir, caCertFile), 0o644)
	return &ca{cert: cert, certPEM: certPEM, key: key}, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n.Add(n, big.NewInt(1))
}

// leaf is a certificate for host, made by the CA (cached).
func (c *ca) leaf(host string, now time.Time) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l := c.leaves[host]; l != nil && now.Add(leafRenew).Before(l.Leaf.NotAfter) {
		return l, nil
	}
	tmpl := &x509.Certificate{
		SerialNumber:   serial(),
		Subject:        pkix.Name{Organization: []string{"patina"}, CommonName: host},
		DNSNames:       []string{host},
		NotBefore:      now.Add(-clockSkew),
		NotAfter:       now.Add(leafLife),
		KeyUsage:       x509.KeyUsageDigitalSignature,
		ExtKeyUsage:    []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		AuthorityKeyId: c.cert.SubjectKeyId,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &c.leafKey.PublicKey, c.key)
	if err != nil {
		return nil, err
	}
	parsed, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	l := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: c.leafKey, Leaf: parsed}
	if len(c.leaves) >= maxLeaves {
		clear(c.leaves)
	}
	c.leaves[host] = l
	return l, nil
}

// pem is the CA's certificate.
func (c *ca) pem() []byte { return bytes.Clone(c.certPEM) }
