package pipeline

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/distribution/reference"
)

// Images are pinned by tag and digest. The digest is what is pulled (the tag
// is there for readers and for Dependabot-style updates); a build therefore
// sees the same bits until someone changes the line. The digests could not be
// checked against a registry where this was written (none was reachable): each
// was taken from several independent public repositories pinning the same
// tag (golang:1.26.8-bookworm has been re-pushed, so two digests circulate for
// it; this is the one most of them pin). Confirm with
// `docker buildx imagetools inspect <image>` when bumping. They are the
// defaults of the module's image arguments (see Images): an engine that
// cannot resolve these digests is given other references at call time.
const (
	// GoImage builds and tests patina. Its Go (1.26.8) is the toolchain the
	// repository is developed with; go.mod's `go 1.26.0` line allows it.
	GoImage = "golang:1.26.8-bookworm@sha256:a688600ca24f8a4d3ca77f95b0dd40704a9fc787c826660eb7ba0b641b8b175d"

	// RuntimeImage is the base of the sidecar image: a dated (never re-pushed)
	// Debian 12 tag. Debian rather than distroless because the sidecar runs
	// git (workspaces are git worktrees) and can build its default workspace
	// image with debootstrap.
	RuntimeImage = "debian:bookworm-20260824-slim@sha256:88200866dfff7ea7f5cbcb6ec7c8a701889efe6fe859fe64d6990e4b07ea4171"
)

// Images are the two images a call of the module uses. The module's
// constructor takes each as an argument (--go-image, --runtime-image) whose
// default is the pinned constant above, so that an
// engine behind a registry mirror, or one with no registry at all, can be
// given images it can resolve (a mirror's name, or a local digest) without
// editing the module.
type Images struct {
	// Go builds, vets, lints and tests patina (GoImage by default). It
	// must have Go, git and bash, and be Debian-based (the integration
	// setup installs Docker's engine and debootstrap with apt-get).
	Go string
	// Runtime is the base of the sidecar image (RuntimeImage by default);
	// Debian-based, as BuildImage installs packages with apt-get.
	Runtime string
}

// DefaultImages returns the pinned images.
func DefaultImages() Images {
	return Images{Go: GoImage, Runtime: RuntimeImage}
}

// WithDefaults returns i with every empty reference replaced by its pinned
// default.
func (i Images) WithDefaults() Images {
	d := DefaultImages()
	if i.Go == "" {
		i.Go = d.Go
	}
	if i.Runtime == "" {
		i.Runtime = d.Runtime
	}
	return i
}

// Validate checks that each reference is one a registry could resolve
// ("name[:tag][@digest]", as `docker pull` takes it), naming the argument
// of the one that is not.
func (i Images) Validate() error {
	for _, img := range []struct{ flag, ref string }{
		{"--go-image", i.Go},
		{"--runtime-image", i.Runtime},
	} {
		if _, err := reference.ParseNormalizedNamed(img.ref); err != nil {
			return fmt.Errorf("%s %q: not an image reference (want name[:tag][@sha256:digest]): %w", img.flag, img.ref, err)
		}
	}
	return nil
}

// Cache volumes shared by every call, and where they are mounted. They hold
// only content-addressed data (module zips, compiled packages), so sharing
// them between builds cannot change what a build produces.
const (
	GoModCacheVolume   = "patina-go-mod"
	GoModCachePath     = "/go/pkg/mod"
	GoBuildCacheVolume = "patina-go-build"
	GoBuildCachePath   = "/root/.cache/go-build"
)

// Paths inside the containers.
const (
	// SourcePath is where the project is mounted and the commands run.
	SourcePath = "/src"
	// BinaryPath is where Build writes the patina binary.
	BinaryPath = "/out/patina"
	// ImageBinaryPath is where the sidecar image holds it.
	ImageBinaryPath = "/usr/local/bin/patina"
)

// Sidecar image settings.
const (
	// SidecarPort is the port `patina serve` listens on inside the image.
	SidecarPort = 7070
)

// SidecarEntrypoint is the sidecar image's entrypoint. The Docker socket is
// not in the image: run it with the host's socket mounted, e.g.
//
//	docker run -v /var/run/docker.sock:/var/run/docker.sock -p 7070:7070 <image>
func SidecarEntrypoint() []string {
	return []string{"patina", "serve", "--addr", "0.0.0.0:" + strconv.Itoa(SidecarPort)}
}

// RuntimePackages are the Debian packages installed into the sidecar image:
// git for worktrees, ca-certificates for registries, debootstrap to build
// the default workspace image where no registry is reachable.
func RuntimePackages() []string {
	return []string{"ca-certificates", "debootstrap", "git"}
}

// RuntimeInstall is the command that installs RuntimePackages. This is the
// one step of the image that is not bit-for-bit reproducible: it takes the
// package versions current in Debian 12 at build time.
func RuntimeInstall() []string {
	return []string{"sh", "-c", "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends " +
		strings.Join(RuntimePackages(), " ") + " && rm -rf /var/lib/apt/lists/*"}
}

// SourceIgnore is the +ignore list of the module's source argument (kept in
// sync with main.go by a test): files that must not reach the engine because
// they are large, machine-specific or would make every upload differ.
// Patterns are Dagger's (moby patternmatcher): a pattern without a slash is
// anchored at the source root, "**/" matches any depth.
func SourceIgnore() []string {
	return []string{".git", "patina", "**/*.test", "**/*.out", "**/.DS_Store",
		// What README's example calls write into the repository's root.
		"patina-arm64", "patina-fix-tests", "fix-tests-files", "fix-tests.patch"}
}

// UnresolvedImageError is a reference that passed Validate but that the
// engine could not resolve (a pinned digest an engine without a registry, or
// behind a mirror, does not have). It names the flag that sets the image and
// what to give it instead.
type UnresolvedImageError struct {
	// Flag is the module argument that sets the image ("--go-image").
	Flag string
	// Ref is the reference the engine was given.
	Ref string
	// Err is the engine's answer.
	Err error
}

func (e *UnresolvedImageError) Error() string {
	return fmt.Sprintf("%s %s: the engine cannot resolve this image (%v); give %s a reference this engine "+
		"can resolve (a registry mirror's name, or a local registry's digest) before the function, "+
		"e.g. `dagger call %s REFERENCE test` (README \"Images\")",
		e.Flag, e.Ref, e.Err, e.Flag, e.Flag)
}

func (e *UnresolvedImageError) Unwrap() error { return e.Err }
