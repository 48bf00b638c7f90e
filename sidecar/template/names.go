package template

import (
	"fmt"
	"regexp"
)

// nameRE is a template's name: it becomes an image tag.
var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// ValidName checks a template's name.
func ValidName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%w: template name %q: want 1 to 63 of a-z, 0-9, '_', '.', '-', starting with a letter or digit", ErrInvalid, name)
	}
	return nil
}
