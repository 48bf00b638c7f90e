package secrets

import "errors"

// Errors of this package.
var (
	// ErrInvalid: a name, host or header that cannot be a secret's.
	ErrInvalid = errors.New("invalid secret")
	// ErrNotFound: no secret of that name.
	ErrNotFound = errors.New("no such secret")
)
