// Package disk gives each workspace a disk of its own with a hard size: a
// file system image (ext4, sparse) that holds everything the workspace
// writes (its files, its state, its container's writable layer), mounted
// on the host nosuid,nodev. Writing past its size gives ENOSPC inside the
// workspace and costs the host nothing more.
//
// The images live in a pool: one XFS file system (itself an image file in
// the sidecar's state directory, sized when it is made) that can clone a
// file by reference (FICLONE). A fork clones its source's image: no data
// is copied until either side writes, and sparse files stay sparse.
//
// DESIGN.md says why it is built this way and what it costs.
package disk
