//go:build !linux && !windows

package main

import (
	"context"
	"errors"
)

var errESPUnchecked = errors.New("could not check for IPsec ESP")

// checkESP: Docker's encrypted overlays need Linux's IPsec; elsewhere
// there is nothing to check.
func checkESP(context.Context) error { return errESPUnchecked }
