package tests

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/patina-dev/patina/sidecar/image"
)

// SecretLab are the lab's servers for the secrets tests, on "the
// internet" (203.0.113.10), with certificates of a CA of their own
// (CAFile: give it to the sidecar as SSL_CERT_FILE, never to workspaces):
//
//   - https://api.secret.test:9443 and https://other.test:9443: record
//     every request's headers (Seen) and answer "ok <path>"; below /git/,
//     a git repository over smart HTTP (git http-backend) that answers 401
//     to a request without the Authorization header WantAuth;
//   - http://api.secret.test:9080: the same, in plain HTTP;
//   - https://203.0.113.10:9444: a server that claims to be
//     api.secret.test but whose certificate is for other.test only.
type SecretLab struct {
	CAFile   string
	WantAuth string

	mu   sync.Mutex
	seen []SeenRequest
}

// SeenRequest is a request a lab server received.
type SeenRequest struct {
	Server string // "tls", "plain", "impostor"
	Host   string
	Path   string
	Header http.Header
}

// StartSecretLab starts the servers in lab's namespace.
func StartSecretLab(t *testing.T, lab *NetLab, wantAuth string) *SecretLab {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "patina test lab CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	leaf := func(names ...string) tls.Certificate {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	}
	sl := &SecretLab{CAFile: filepath.Join(t.TempDir(), "lab-ca.pem"), WantAuth: wantAuth}
	if err := os.WriteFile(sl.CAFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		t.Fatal(err)
	}

	// The repository git clones: one commit holding README.
	root := t.TempDir()
	repo := filepath.Join(root, "repo.git")
	work := GitRepo(t, map[string]string{"README": "cloned through patina\n"})
	if out, err := exec.Command("git", "clone", "-q", "--bare", work, repo).CombinedOutput(); err != nil {
		t.Fatalf("git clone --bare: %v\n%s", err, out)
	}
	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	backend := &cgi.Handler{Path: gitPath, Args: []string{"http-backend"}, Root: "/git",
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}

	handler := func(server string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			sl.mu.Lock()
			sl.seen = append(sl.seen, SeenRequest{Server: server, Host: r.Host, Path: r.URL.Path, Header: r.Header.Clone()})
			sl.mu.Unlock()
			if strings.HasPrefix(r.URL.Path, "/git/") {
				if r.Header.Get("Authorization") != sl.WantAuth {
					w.Header().Set("WWW-Authenticate", `Basic realm="lab"`)
					http.Error(w, "unauthorized", http.StatusUnauthorized)
					return
				}
				backend.ServeHTTP(w, r)
				return
			}
			_, _ = w.Write([]byte("ok " + r.URL.Path + "\n"))
		})
	}
	serve := func(addr string, h http.Handler, cfg *tls.Config) {
		ln := lab.listen(t, "tcp", addr)
		if cfg != nil {
			cfg.NextProtos = []string{"h2", "http/1.1"}
			ln = tls.NewListener(ln, cfg)
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
	}
	serve("203.0.113.10:9443", handler("tls"), &tls.Config{Certificates: []tls.Certificate{leaf("api.secret.test", "other.test")}})
	serve("203.0.113.10:9080", handler("plain"), nil)
	serve("203.0.113.10:9444", handler("impostor"), &tls.Config{Certificates: []tls.Certificate{leaf("other.test")}})
	return sl
}

// Seen returns the requests received for path.
func (sl *SecretLab) Seen(path string) []SeenRequest {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	var out []SeenRequest
	for _, r := range sl.seen {
		if r.Path == path || strings.HasPrefix(r.Path, path+"/") {
			out = append(out, r)
		}
	}
	return out
}

// ToolsImage is a workspace image with curl, python3 and openssl beside
// the default packages, built (offline, as patina/base is) when missing.
func ToolsImage(t *testing.T) string {
	t.Helper()
	const tag = "patina/test-secrets:bookworm"
	RequireDocker(t)
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	pkgs := append(image.DefaultPackages(), "curl", "python3", "openssl")
	if _, err := image.New(image.Config{}, cli, nil).Build(ctx, image.BuildRequest{Tag: tag, Packages: pkgs, IfMissing: true, Progress: os.Stderr}); err != nil {
		t.Fatalf("the test image %s is missing and could not be built: %v", tag, err)
	}
	return tag
}
