package image

import (
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/distribution/reference"
)

func (r BuildRequest) withDefaults(cfg Config) BuildRequest {
	if r.Tag == "" {
		r.Tag = DefaultTag
	}
	if r.Suite == "" {
		r.Suite = DefaultSuite
	}
	if len(r.Packages) == 0 {
		r.Packages = DefaultPackages()
	}
	if r.TempDir == "" {
		r.TempDir = cfg.TempDir
	}
	return r
}

var (
	suiteRE   = regexp.MustCompile(`^[a-z0-9][a-z0-9.+-]*$`)
	packageRE = regexp.MustCompile(`^[a-z0-9][a-z0-9.+-]+$`) // Debian policy 5.6.1
)

// validate refuses what could not be passed safely to debootstrap or Docker.
func (r BuildRequest) validate() error {
	named, err := reference.ParseNormalizedNamed(r.Tag)
	if err != nil {
		return fmt.Errorf("%w: tag %q: %v", ErrInvalid, r.Tag, err)
	}
	if _, ok := named.(reference.Digested); ok {
		return fmt.Errorf("%w: tag %q: a built image cannot have a digest reference", ErrInvalid, r.Tag)
	}
	if !suiteRE.MatchString(r.Suite) {
		return fmt.Errorf("%w: suite %q", ErrInvalid, r.Suite)
	}
	for _, p := range r.Packages {
		if !packageRE.MatchString(p) {
			return fmt.Errorf("%w: package name %q", ErrInvalid, p)
		}
	}
	return nil
}

// validMirror accepts the URIs debootstrap can fetch from.
func validMirror(mirror string) error {
	u, err := url.Parse(mirror)
	if err != nil || strings.HasPrefix(mirror, "-") || strings.ContainsAny(mirror, " \t\n") {
		return fmt.Errorf("%w: mirror %q", ErrInvalid, mirror)
	}
	switch u.Scheme {
	case "http", "https", "ftp":
		if u.Host != "" {
			return nil
		}
	case "file":
		if filepath.IsAbs(u.Path) {
			return nil
		}
	}
	return fmt.Errorf("%w: mirror %q: want an http, https, ftp or file URL", ErrInvalid, mirror)
}
