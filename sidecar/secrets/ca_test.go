package secrets

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The CA is made once, its key 0600, and kept across restarts; the
// certificates it makes verify against it for their host only.
func TestCA(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	c, err := loadCA(dir, now)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, caDirectory, caKeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("exp the CA's key 0600, got %v %v", fi, err)
	}
	c2, err := loadCA(dir, now)
	if err != nil {
		t.Fatal(err)
	}
	if string(c2.pem()) != string(c.pem()) {
		t.Fatal("a restart made another CA: workspaces would stop trusting it")
	}
	leaf, err := c2.leaf("api.test", now)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	b, _ := pem.Decode(c.pem())
	ca, _ := x509.ParseCertificate(b.Bytes)
	pool.AddCert(ca)
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: "api.test", Roots: pool}); err != nil {
		t.Fatalf("the host's certificate does not verify against the CA: %v", err)
	}
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: "other.test", Roots: pool}); err == nil {
		t.Fatal("the host's certificate verifies for another host")
	}
	if again, _ := c2.leaf("api.test", now); again != leaf {
		t.Fatal("the host's certificate was not cached")
	}
	// A damaged CA is made again rather than used.
	if err := os.WriteFile(filepath.Join(dir, caDirectory, caCertFile), []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	c3, err := loadCA(dir, now)
	if err != nil || string(c3.pem()) == string(c.pem()) {
		t.Fatalf("exp a new CA in place of a damaged one, got %v", err)
	}
}
