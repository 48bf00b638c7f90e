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
