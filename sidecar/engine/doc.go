// Package engine holds what the workspace domain and a container engine
// say to each other: the container a workspace wants (Spec), what an
// engine reports of one (State, Owned), how its agent starts (AgentStart),
// a fork's copy (CopySpec), the paths inside a workspace's container, and
// the engine's errors. It imports no engine's package: the domain
// (sidecar/workspace) depends on it and not on Docker; sidecar/container
// implements it on a Docker engine or a Swarm.
package engine
