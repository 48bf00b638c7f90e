package inside

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/sidecar/agent/wire"
	"github.com/patina-dev/patina/sidecar/mux"
)

// imageRoots are where images keep their CA bundle (Go's list, in its
// order): the first that is a regular file is the image's roots.
var imageRoots = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem",
	"/etc/pki/tls/cacert.pem",
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
	"/etc/ssl/cert.pem",
}

// maxRoots bounds the image's bundle read.
const maxRoots = 16 << 20

// checkSetup refuses a setup the agent cannot take.
func checkSetup(r *wire.SetupRequest) error {
	env := maps.Clone(r.Env)
	if r.Trust != nil {
		t := r.Trust
		for _, p := range []string{t.CAPath, t.BundlePath} {
			if !filepath.IsAbs(p) || filepath.Clean(p) != p || p == "/" {
				return fmt.Errorf("%w: setup: %q is not a clean absolute path", session.ErrInvalid, p)
			}
		}
		if b, _ := pem.Decode([]byte(t.CA)); b == nil || b.Type != "CERTIFICATE" {
			return fmt.Errorf("%w: setup: the CA is not a PEM certificate", session.ErrInvalid)
		}
		if env == nil {
			env = map[string]string{}
		}
		maps.Copy(env, t.Env)
	}
	for k, v := range env {
		if !session.ValidEnvName(k) || strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("%w: setup: %q is not a variable a shell can have", session.ErrInvalid, k)
		}
	}
	return nil
}

// setup makes the request's environment every new shell's, after writing
// the trust store it names; a trust store that cannot be written is left
// out (its variables too), and said.
func (s *Server) setup(st *mux.Stream, args json.RawMessage) error {
	var req wire.SetupRequest
	if err := json.Unmarshal(args, &req); err != nil {
		return fmt.Errorf("%w: setup: %v", session.ErrInvalid, err)
	}
	if err := checkSetup(&req); err != nil {
		return err
	}
	env := maps.Clone(req.Env)
	var res wire.SetupResult
	if t := req.Trust; t != nil {
		if err := installTrust(*t); err != nil {
			res.Warning = "the workspace's trust store for patina's CA could not be written: " + err.Error()
			s.log.Warn("setup: trust store", "err", err)
		} else {
			if env == nil {
				env = map[string]string{}
			}
			maps.Copy(env, t.Env)
		}
	}
	entries := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		entries = append(entries, k+"="+env[k])
	}
	s.sessions.SetExtraEnv(entries)
	writeResult(st, res)
	return nil
}

// installTrust writes the CA and the bundle (the image's roots, then the
// CA), each only if it changed.
func installTrust(t wire.TrustSetup) error {
	ca := []byte(strings.TrimSpace(t.CA) + "\n")
	roots, from := readImageRoots()
	var bundle bytes.Buffer
	if len(roots) > 0 {
		fmt.Fprintf(&bundle, "# The image's roots (%s)\n", from)
		bundle.Write(roots)
		if roots[len(roots)-1] != '\n' {
			bundle.WriteByte('\n')
		}
	}
	bundle.WriteString("# patina's CA: the egress proxy sets this workspace's secrets on HTTPS requests to their hosts\n")
	bundle.Write(ca)
	for _, f := range []struct {
		path string
		data []byte
	}{{t.CAPath, ca}, {t.BundlePath, bundle.Bytes()}} {
		if err := writeIfChanged(f.path, f.data); err != nil {
			return err
		}
	}
	return nil
}

// readImageRoots reads the image's CA bundle: a regular file, bounded
// (never a FIFO or a device that would block or never end).
func readImageRoots() ([]byte, string) {
	for _, p := range imageRoots {
		if b, err := readRegular(p, maxRoots); err == nil && len(b) > 0 {
			return b, p
		}
	}
	return nil, ""
}

// readRegular reads up to max bytes of a regular file (following links),
// refusing anything else without waiting on it.
func readRegular(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return io.ReadAll(io.LimitReader(f, max))
}

func writeIfChanged(path string, data []byte) error {
	if old, err := readRegular(path, int64(len(data))+1); err == nil && bytes.Equal(old, data) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	_ = os.Remove(tmp)
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
