package workspace

import (
	"context"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"strings"

	"github.com/patina-dev/patina/sidecar/agent"
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
func (m *Manager) ReadFile(ctx context.Context, idOrName, p string) (*agent.File, []wire.FileInfo, error) {
	rel, err := CleanPath(p)
	if err != nil {
		return nil, nil, err
	}
	w, c, err := m.agentFor(ctx, idOrName)
	if err != nil {
		return nil, nil, err
	}
	f, ents, err := c.ReadFile(ctx, rel)
	return f, ents, w.explain(err)
}

// WriteFile writes body to a file atomically (parents made as needed).
func (m *Manager) WriteFile(ctx context.Context, idOrName, p string, body io.Reader) (wire.FileWriteResult, error) {
	rel, err := CleanPath(p)
	if err != nil {
		return wire.FileWriteResult{}, err
	}
	if rel == "." || strings.HasSuffix(p, "/") {
		return wire.FileWriteResult{}, fmt.Errorf("%w: a file path is required; %q names a directory (directories are made as needed)", ErrInvalid, "/"+p)
	}
	w, c, err := m.agentFor(ctx, idOrName)
	if err != nil {
		return wire.FileWriteResult{}, err
	}
	res, err := c.WriteFile(ctx, rel, body, m.cfg.MaxFileBytes)
	return res, w.explain(err)
}

// DeleteFile removes a file or a directory tree.
func (m *Manager) DeleteFile(ctx context.Context, idOrName, p string) error {
	rel, err := CleanPath(p)
	if err != nil {
		return err
	}
	if rel == "." {
		return fmt.Errorf("%w: refusing to delete the workspace's root directory", ErrInvalid)
	}
	w, c, err := m.agentFor(ctx, idOrName)
	if err != nil {
		return err
	}
	return w.explain(c.DeleteFile(ctx, rel))
}

// MaxFileBytes is the largest upload.
func (m *Manager) MaxFileBytes() int64 { return m.cfg.MaxFileBytes }
