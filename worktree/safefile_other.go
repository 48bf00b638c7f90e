//go:build !unix

package worktree

import "os"

// openNoFollow opens path for reading. Where O_NOFOLLOW and O_NONBLOCK do
// not exist, readSmallFile's Lstat and Stat checks are all there is.
func openNoFollow(path string) (*os.File, error) { return os.Open(path) }
