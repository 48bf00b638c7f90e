// Package tests holds patina's end-to-end tests: a harness that starts a real
// `patina serve` against the real Docker engine, and the tests that drive it.
package tests
