package worktree

import (
	"context"
	"fmt"
	"path"
	"strings"
)

// Reading a commit's files, for what is built from them (a workspace's
// template): through git's object database only, so a symlink in the
// repository is read as a link, never followed on the host.

// ResolveRev resolves rev (a ref, a commit, "" for HEAD) to a commit id,
// as a create's base is resolved.
func (r *Repo) ResolveRev(ctx context.Context, rev string) (string, error) {
	commit, _, err := r.resolveBase(ctx, rev)
	return commit, err
}

// cleanTreePath checks a repository-relative path ("" or "." is the
// root): no leading "/", no "..", no NUL.
func cleanTreePath(p string) (string, error) {
	if strings.ContainsRune(p, 0) || strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("%w: path %q", ErrInvalidName, p)
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return "", fmt.Errorf("%w: path %q leaves the repository", ErrInvalidName, p)
		}
	}
	return path.Clean("/" + p)[1:], nil
}

// PathType says what path is in commit's tree: "blob", "tree", or ""
// when it is not there.
func (r *Repo) PathType(ctx context.Context, commit, p string) (string, error) {
	c, err := cleanTreePath(p)
	if err != nil {
		return "", err
	}
	out, err := r.run(ctx, "cat-file", "-t", "--end-of-options", commit+":"+c)
	if err != nil {
		if exitCode(err) == 128 || exitCode(err) == 1 {
			return "", nil
		}
		return "", err
	}
	return out, nil
}

// ReadBlob returns the file at p in commit, at most limit bytes
// (ErrTooLarge beyond); a path that is not a file is ErrNotFound.
func (r *Repo) ReadBlob(ctx context.Context, commit, p string, limit int64) ([]byte, error) {
	c, err := cleanTreePath(p)
	if err != nil {
		return nil, err
	}
	if t, err := r.PathType(ctx, commit, c); err != nil {
		return nil, err
	} else if t != "blob" {
		return nil, fmt.Errorf("%w: %s is not a file in %.12s", ErrNotFound, c, commit)
	}
	cmd := r.cmd(nil, "cat-file", "blob", "--end-of-options", commit+":"+c)
	cmd.limit = limit
	return r.git.run(ctx, cmd)
}

// Archive returns the tree at dir in commit ("" or "." for the whole
// tree) as a tar archive whose names are relative to dir, at most limit
// bytes (ErrTooLarge beyond).
func (r *Repo) Archive(ctx context.Context, commit, dir string, limit int64) ([]byte, error) {
	c, err := cleanTreePath(dir)
	if err != nil {
		return nil, err
	}
	tree := commit + "^{tree}"
	if c != "" {
		tree = commit + ":" + c
		if t, err := r.PathType(ctx, commit, c); err != nil {
			return nil, err
		} else if t != "tree" {
			return nil, fmt.Errorf("%w: %s is not a directory in %.12s", ErrNotFound, c, commit)
		}
	}
	cmd := r.cmd(nil, "archive", "--format=tar", "--end-of-options", tree)
	cmd.limit = limit
	return r.git.run(ctx, cmd)
}
