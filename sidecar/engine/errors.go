package engine

import "errors"

// ErrNotFound: no such container.
var ErrNotFound = errors.New("container not found")

// ErrDiskUnsupported: this engine cannot keep a workspace's container layer
// on its disk (a remote engine, another storage driver).
var ErrDiskUnsupported = errors.New("this engine cannot limit a workspace's disk")

// ErrUnsupported: the engine cannot do this.
var ErrUnsupported = errors.New("not supported by this engine")

// ErrNodeDown: the node a workspace is pinned to (where its volumes are)
// is down, drained or paused; it can run again when the node is back.
var ErrNodeDown = errors.New("the workspace's node is unavailable")

// ErrNotPlaced: the swarm could not run a new workspace (no node meets its
// constraints or has the resources, or the node its task went to rejected
// it: the image or the node's binary missing there, its network failing).
// Nothing of the workspace is left behind.
var ErrNotPlaced = errors.New("the swarm could not run the workspace")

// ErrImageMissing: an image is not on the engine and could not be pulled;
// the wrapping error says how to build or load it.
var ErrImageMissing = errors.New("image missing")

// ErrAgentBinary: the agent's binary on an engine (its volume, or a swarm
// node's --node-binary) is not, or could not be checked to be, this
// sidecar's own.
var ErrAgentBinary = errors.New("the agent's binary could not be verified")
