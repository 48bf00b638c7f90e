// Package dagenv lets package main of the Dagger module be tested without an
// engine. Its only effect is an init function that sets
// DAGGER_SESSION_PORT and DAGGER_SESSION_TOKEN to dummy values; root tests
// import it for that effect:
//
//	import _ "github.com/patina-dev/patina/internal/dagenv"
//
// Why it works. The generated package internal/dagger connects in its init
// (getClientParams) and panics when those variables are missing, which
// would kill every test binary of package main before a test runs. Since Go
// 1.21 the spec fixes the order of package initialisation: packages are
// sorted by import path and, repeatedly, the first package in that order
// whose imports are all initialised is initialised next. Suppose
// internal/dagger were initialised first. At that step all its imports were
// initialised, os among them, so this package (which imports only os) was
// ready too; and its path, ".../internal/dagenv", sorts before
// ".../internal/dagger" ('e' < 'g'), so the rule would have picked it
// instead. Hence this init always runs first. Two rules keep that true:
//   - this package imports nothing but os (an import internal/dagger lacks
//     could leave it not ready when internal/dagger is);
//   - its path sorts before .../internal/dagger (any name starting with
//     "dagger", like "daggerenv", sorts after it).
//
// TestInitOrder in the root package fails if the order ever breaks (if it
// broke, the test binary would panic at start-up instead, which fails too).
//
// The port points at nothing (port 1 on 127.0.0.1 refuses connections), so
// a query made by mistake fails with a connection error instead of reaching
// a real engine; the values are set unconditionally for the same reason.
// Never import this package outside tests.
package dagenv

import "os"

// Port and Token are the dummy session values set by init.
const (
	Port  = "1"
	Token = "patina-test-no-engine"
)

func init() {
	os.Setenv("DAGGER_SESSION_PORT", Port)
	os.Setenv("DAGGER_SESSION_TOKEN", Token)
}
