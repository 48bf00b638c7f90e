package pipeline

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// DefaultVersion is stamped into binaries built without an explicit version.
// It is a constant, not a date or a commit read from the environment, so that
// the same source always gives the same binary.
const DefaultVersion = "dev"

// MainPackage is the package Build compiles.
const MainPackage = "./sidecar/cmd/patina"

// VersionVar is the variable -X stamps the version into.
const VersionVar = "main.version"

// EnvVar is one environment variable of a container.
type EnvVar struct {
	Name  string
	Value string
}

// BuildRequest describes one build of the patina binary.
type BuildRequest struct {
	// Platform is an OCI platform ("linux/arm64", "linux/arm/v7"); empty
	// means the platform the build container runs on.
	Platform string
	// Version is stamped into the binary; empty means DefaultVersion.
	Version string
}

// Target is a Go build target.
type Target struct {
	GOOS, GOARCH string
	// Variant is the OCI variant: GOARM for arm ("v7" -> 7), GOAMD64 for
	// amd64 ("v3"); empty when the platform has none.
	Variant string
}

var (
	platformPart = regexp.MustCompile(`^[a-z0-9]+$`)
	armVariant   = regexp.MustCompile(`^v[5-7]$`)
	amd64Variant = regexp.MustCompile(`^v[1-4]$`)
)

// ParsePlatform splits an OCI platform "os/arch[/variant]" into a Go target.
func ParsePlatform(platform string) (Target, error) {
	parts := strings.Split(platform, "/")
	if len(parts) < 2 || len(parts) > 3 {
		return Target{}, fmt.Errorf("platform %q: want os/arch or os/arch/variant", platform)
	}
	for _, p := range parts {
		if !platformPart.MatchString(p) {
			return Target{}, fmt.Errorf("platform %q: %q is not a valid component", platform, p)
		}
	}
	t := Target{GOOS: parts[0], GOARCH: parts[1]}
	if len(parts) == 3 {
		t.Variant = parts[2]
		switch t.GOARCH {
		case "arm":
			if !armVariant.MatchString(t.Variant) {
				return Target{}, fmt.Errorf("platform %q: arm variant must be v5, v6 or v7", platform)
			}
		case "amd64":
			if !amd64Variant.MatchString(t.Variant) {
				return Target{}, fmt.Errorf("platform %q: amd64 variant must be v1 to v4", platform)
			}
		case "arm64":
			// OCI's "v8" is the only arm64 variant Go builds for.
			if t.Variant != "v8" {
				return Target{}, fmt.Errorf("platform %q: arm64 variant must be v8", platform)
			}
		default:
			return Target{}, fmt.Errorf("platform %q: no variant is supported for %s", platform, t.GOARCH)
		}
	}
	return t, nil
}

// Env returns the environment variables that select the target.
func (t Target) Env() []EnvVar {
	env := []EnvVar{{"GOOS", t.GOOS}, {"GOARCH", t.GOARCH}}
	switch t.GOARCH {
	case "arm":
		if t.Variant != "" {
			env = append(env, EnvVar{"GOARM", strings.TrimPrefix(t.Variant, "v")})
		}
	case "amd64":
		if t.Variant != "" {
			env = append(env, EnvVar{"GOAMD64", t.Variant})
		}
	}
	return env
}

var versionPattern = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z._+-]{0,127}$`)

// ValidateVersion accepts version strings that are safe inside -ldflags
// (no spaces or quotes) and look like versions: "v1.2.3", "1.2.3-rc.1+abc",
// "dev".
func ValidateVersion(v string) error {
	if !versionPattern.MatchString(v) {
		return fmt.Errorf("version %q: use letters, digits and . _ + - only (at most 128, not starting with punctuation)", v)
	}
	return nil
}

// version returns the version to stamp: r.Version, or DefaultVersion.
func (r BuildRequest) version() (string, error) {
	if r.Version == "" {
		return DefaultVersion, nil
	}
	if err := ValidateVersion(r.Version); err != nil {
		return "", err
	}
	return r.Version, nil
}

// Env returns the build's environment: cgo off (a static binary that runs
// in any image), and the target when a platform was asked for. Sorted by
// name.
func (r BuildRequest) Env() ([]EnvVar, error) {
	env := []EnvVar{{"CGO_ENABLED", "0"}}
	if r.Platform != "" {
		t, err := ParsePlatform(r.Platform)
		if err != nil {
			return nil, err
		}
		env = append(env, t.Env()...)
	}
	sortEnv(env)
	return env, nil
}

// Command returns the go build command line. -trimpath and -buildvcs=false
// keep paths and VCS state of the build machine out of the binary, so the
// output depends only on the source, the Go image and the version.
func (r BuildRequest) Command() ([]string, error) {
	v, err := r.version()
	if err != nil {
		return nil, err
	}
	return []string{
		"go", "build",
		"-trimpath",
		"-buildvcs=false",
		"-ldflags", "-s -w -X " + VersionVar + "=" + v,
		"-o", BinaryPath,
		MainPackage,
	}, nil
}

func sortEnv(env []EnvVar) {
	slices.SortStableFunc(env, func(a, b EnvVar) int { return strings.Compare(a.Name, b.Name) })
}
