package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"strings"

	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/sidecar/agent/wire"
)

// Files are read and written by the workspace's agent, inside the
// container: the sidecar never opens a path of the workspace's. Paths are
// relative to /workspace; one that leaves it, by ".." or through a
// symlink, is refused (wire.ErrEscapes).

// CleanPath turns a path from a request into a clean relative one,
// refusing one that would leave the workspace ("" and "/" are ".").
func CleanPath(p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("%w: path contains a NUL byte", wire.ErrEscapes)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return "", fmt.Errorf("%w: %q contains \"..\"", wire.ErrEscapes, p)
		}
	}
	rel := path.Clean("/" + p)[1:]
	if rel == "" {
		return ".", nil
	}
	if !filepath.IsLocal(rel) {
		return "", fmt.Errorf("%w: %q is not a path inside the workspace", wire.ErrEscapes, p)
	}
	if len(rel) > 4096 {
		return "", fmt.Errorf("%w: the path is longer than 4096 bytes", ErrInvalid)
	}
	return rel, nil
}

// ReadFile opens a regular file for reading, or lists a directory
// (File nil).
func (m *Manager) ReadFile(ctx context.Context, idOrName, p string) (*File, []FileInfo, error) {
	rel, err := CleanPath(p)
	if err != nil {
		return nil, nil, fileError(err, idOrName, p)
	}
	w, c, err := m.agentFor(ctx, idOrName)
	if err != nil {
		return nil, nil, fileError(err, idOrName, p)
	}
	f, ents, err := c.ReadFile(ctx, rel)
	return file(f), fileInfos(ents), fileError(w.explain(err), idOrName, p)
}

// WriteFile writes body to a file atomically (parents made as needed).
func (m *Manager) WriteFile(ctx context.Context, idOrName, p string, body io.Reader) (FileWriteResult, error) {
	rel, err := CleanPath(p)
	if err != nil {
		return FileWriteResult{}, fileError(err, idOrName, p)
	}
	if rel == "." || strings.HasSuffix(p, "/") {
		return FileWriteResult{}, fmt.Errorf("%w: a file path is required; %q names a directory (directories are made as needed)", ErrInvalid, "/"+p)
	}
	w, c, err := m.agentFor(ctx, idOrName)
	if err != nil {
		return FileWriteResult{}, fileError(err, idOrName, p)
	}
	res, err := c.WriteFile(ctx, rel, body, m.cfg.MaxFileBytes)
	return fileWriteResult(res), fileError(w.explain(err), idOrName, p)
}

// DeleteFile removes a file or a directory tree.
func (m *Manager) DeleteFile(ctx context.Context, idOrName, p string) error {
	rel, err := CleanPath(p)
	if err != nil {
		return fileError(err, idOrName, p)
	}
	if rel == "." {
		return fmt.Errorf("%w: refusing to delete the workspace's root directory", ErrInvalid)
	}
	w, c, err := m.agentFor(ctx, idOrName)
	if err != nil {
		return fileError(err, idOrName, p)
	}
	return fileError(w.explain(c.DeleteFile(ctx, rel)), idOrName, p)
}

// fileError says a missing file in the user's terms (ErrNotFound): the
// agent's answer names the system call (openat, statat ...) that found
// nothing. A missing workspace is left as it is.
func fileError(err error, idOrName, p string) error {
	if errors.Is(err, session.ErrNotFound) && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%w: no file or directory /workspace/%s in workspace %s", ErrNotFound, strings.Trim(p, "/"), idOrName)
	}
	return err
}

// MaxFileBytes is the largest upload.
func (m *Manager) MaxFileBytes() int64 { return m.cfg.MaxFileBytes }
