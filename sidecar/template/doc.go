// Package template makes workspace templates: images that hold a
// project's environment, built from what its repository says
// (.devcontainer/devcontainer.json, .devcontainer.json, or a Dockerfile
// named on create), with the create commands already run, and named by
// the content that made them, so the next workspace of the same
// repository state starts from the image with no build.
//
// A template is a Docker image tagged patina-template:<name>, carrying
// labels: the content hash, and the template's spec (environment,
// workspaceFolder, forwarded ports). Docker keeps them: templates outlive
// the sidecar, and ls, get and rm are image calls.
//
// What comes from the repository is hostile input: devcontainer.json and
// the Dockerfile are parsed here (no URL in ADD, only images already on
// the engine, nothing pulled), the build runs through the engine's
// classic builder (no host mounts, no privileges, no network, memory and
// CPU bounds) with a bounded context, and the create commands run in a
// container with a workspace's dropped capabilities, no-new-privileges,
// no network and bounds on memory, processes and time. Nothing runs on
// the host. See DESIGN.md.
//
// This package holds the templates' values, names and errors and the
// checks of devcontainer.json and Dockerfiles, and imports no engine's
// package; sidecar/template/builder builds, lists and removes templates
// on a Docker engine.
package template
