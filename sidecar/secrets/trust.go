package secrets

import "path"

// TrustDir is where a workspace granted secrets finds patina's CA: the
// agent writes it in its container (never the sidecar: it writes no path
// a workspace can change), as two files:
//
//	patina-ca.pem  the CA alone
//	ca-bundle.pem  the image's own roots, then the CA
const TrustDir = "/.patina/tls"

// TrustFiles are the CA's and the bundle's paths in dir.
func TrustFiles(dir string) (ca, bundle string) {
	return path.Join(dir, "patina-ca.pem"), path.Join(dir, "ca-bundle.pem")
}

// TrustEnvNames are the variables that name the bundle (or, for Node,
// which adds to its own roots, the CA alone) in every session of a
// workspace granted secrets: OpenSSL and Go (SSL_CERT_FILE), Python's
// requests, Node, git, curl.
var TrustEnvNames = []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO", "CURL_CA_BUNDLE"}

// TrustEnv is those variables with their values, for the files in dir.
func TrustEnv(dir string) map[string]string {
	ca, bundle := TrustFiles(dir)
	env := make(map[string]string, len(TrustEnvNames))
	for _, k := range TrustEnvNames {
		env[k] = bundle
	}
	env["NODE_EXTRA_CA_CERTS"] = ca
	return env
}
