package engine

// RepoObjects is where a repository workspace's container sees the object
// store of its base commit (read-only); further stores follow as
// RepoObjects-1, RepoObjects-2, ...
const RepoObjects = "/.patina/repo/objects"
