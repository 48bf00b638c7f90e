package worktree

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// errNotRegular is a file that is a symlink, FIFO, device or directory
// where a regular file was expected.
var errNotRegular = errors.New("not a regular file")

// readSmallFile reads a regular file of at most max bytes without
// following a symlink and without blocking on a FIFO: for files someone
// else may have planted (a legacy workspace's admin files) or
// configuration read outside git.
func readSmallFile(path string, max int64) ([]byte, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w (%v)", path, errNotRegular, fi.Mode().Type())
	}
	f, err := openNoFollow(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || !os.SameFile(fi, st) {
		return nil, fmt.Errorf("%s: %w (replaced while opening)", path, errNotRegular)
	}
	if st.Size() > max {
		return nil, fmt.Errorf("%s: %w: %d bytes", path, ErrTooLarge, st.Size())
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: %w: more than %d bytes", path, ErrTooLarge, max)
	}
	return b, nil
}
