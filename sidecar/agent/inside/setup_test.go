package inside

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/patina-dev/patina/sidecar/agent/wire"
)

func testCAPEM(t *testing.T) string {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// A setup the agent cannot take is refused, changing nothing.
func TestSetupRefusesBadInput(t *testing.T) {
	for _, req := range []wire.SetupRequest{
		{Env: map[string]string{"1BAD": "x"}},
		{Env: map[string]string{"OK": "a\x00b"}},
		{Trust: &wire.TrustSetup{CA: "not a PEM", CAPath: "/tmp/x/ca.pem", BundlePath: "/tmp/x/b.pem"}},
		{Trust: &wire.TrustSetup{CA: testCAPEM(t), CAPath: "relative/ca.pem", BundlePath: "/tmp/x/b.pem"}},
		{Trust: &wire.TrustSetup{CA: testCAPEM(t), CAPath: "/tmp/x/../ca.pem", BundlePath: "/tmp/x/b.pem"}},
	} {
		if err := checkSetup(&req); err == nil {
			t.Errorf("exp %+v refused", req)
		}
	}
}
