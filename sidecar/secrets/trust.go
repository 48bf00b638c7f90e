package secrets

// Where a workspace granted secrets finds patina's CA: the agent writes
// both files in its container (never the sidecar: it writes no path a
// workspace can change), the bundle being the image's own roots followed
// by patina's CA.
const (
	CAPath     = "/.patina/tls/patina-ca.pem"
	BundlePath = "/.patina/tls/ca-bundle.pem"
)

// TrustEnvNames are the variables that name the bundle (or, for Node,
// which adds to its own roots, the CA alone) in every session of a
// workspace granted secrets: OpenSSL and Go (SSL_CERT_FILE), Python's
// requests, Node, git, curl.
var TrustEnvNames = []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO", "CURL_CA_BUNDLE"}

// TrustEnv is those variables with their values.
func TrustEnv() map[string]string {
	env := make(map[string]string, len(TrustEnvNames))
	for _, k := range TrustEnvNames {
		env[k] = BundlePath
	}
	env["NODE_EXTRA_CA_CERTS"] = CAPath
	return env
}
