// Package pipeline owns what patina's Dagger functions do, as plain data: the
// pinned images, cache volumes and paths, the exact go commands of build,
// test and lint, and how their exit codes and output become a function's
// result. It imports nothing from Dagger, so all of it is unit-tested without
// an engine; the module's main.go only turns these values into Dagger calls.
package pipeline
