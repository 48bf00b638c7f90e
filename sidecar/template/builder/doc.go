// Package builder makes templates (sidecar/template) on a Docker engine:
// it checks that a source needs nothing from outside the engine, builds
// its image with the engine's classic builder, runs its create commands
// in a bounded container and commits the result, tagged by the content
// that made it. Manager also lists, finds and removes them. See
// ../DESIGN.md.
package builder
