// Package depcheck finds the imports a package must not have, directly or
// through the packages of its own module it imports: tests use it to keep
// the domain apart from the engines, and the in-container program apart
// from the sidecar.
package depcheck

import (
	"go/build"
	"path/filepath"
	"strings"
)

// Module is this module's path.
const Module = "github.com/patina-dev/patina"

// Find walks pkg (an import path of Module, whose root directory is root)
// and the packages of Module it imports, for the current GOOS, and returns
// each import of a forbidden path as "a → b imports c". A forbidden entry
// ending in "/" is a prefix; one ending in "$" is that package alone (not
// those under it); any other is a package and those under it. walked is
// how many packages were read.
func Find(root, pkg string, forbidden []string) (found []string, walked int, err error) {
	seen := map[string]bool{}
	var walk func(pkg, chain string) error
	walk = func(pkg, chain string) error {
		if seen[pkg] {
			return nil
		}
		seen[pkg] = true
		dir := filepath.Join(root, filepath.FromSlash(strings.TrimPrefix(pkg, Module)))
		p, err := build.Default.ImportDir(dir, 0)
		if err != nil {
			return err
		}
		for _, imp := range p.Imports {
			for _, bad := range forbidden {
				if forbids(bad, imp) {
					found = append(found, chain+" imports "+imp)
				}
			}
			if strings.HasPrefix(imp, Module+"/") {
				if err := walk(imp, chain+" → "+strings.TrimPrefix(imp, Module+"/")); err != nil {
					return err
				}
			}
		}
		return nil
	}
	err = walk(pkg, strings.TrimPrefix(pkg, Module+"/"))
	return found, len(seen), err
}

// forbids reports whether the forbidden entry bad covers the import path
// imp (see Find).
func forbids(bad, imp string) bool {
	switch {
	case strings.HasSuffix(bad, "/"):
		return strings.HasPrefix(imp, bad)
	case strings.HasSuffix(bad, "$"):
		return imp == strings.TrimSuffix(bad, "$")
	}
	return imp == bad || strings.HasPrefix(imp, bad+"/")
}
