package sidecar

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/patina-dev/patina/sidecar/client"
)

// handleFiles serves GET (a file's bytes, or a directory's listing as
// JSON), PUT (write a file atomically, creating parents) and DELETE on the
// workspace's directory. Paths are relative to /workspace; one that leaves
// it, by ".." or through a symlink, is refused with 400.
func (s *Service) handleFiles(w http.ResponseWriter, r *http.Request, id, rest string) {
	ws, err := s.lookup(id)
	if err != nil {
		writeError(w, err)
		return
	}
	rel, err := cleanRel(rest)
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	snap := ws.snapshot()
	root, err := os.OpenRoot(snap.Worktree)
	if err != nil {
		writeError(w, fmt.Errorf("workspace directory: %w", err))
		return
	}
	defer root.Close()
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		s.getFile(w, r, root, rel)
	case http.MethodPut:
		if strings.HasSuffix(rest, "/") || rel == "." {
			writeError(w, fmt.Errorf("%w: PUT writes a file; %q names a directory (directories are made as needed)", errInvalid, "/"+rest))
			return
		}
		s.putFile(w, r, root, rel)
	case http.MethodDelete:
		if rel == "." {
			writeError(w, fmt.Errorf("%w: refusing to delete the workspace's root directory", errInvalid))
			return
		}
		if _, err := root.Lstat(rel); err != nil {
			writeError(w, fileError(err))
			return
		}
		if err := root.RemoveAll(rel); err != nil {
			writeError(w, fileError(err))
			return
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Allow", "GET, HEAD, PUT, DELETE")
		writeError(w, fmt.Errorf("%w: %s on files; use GET, HEAD, PUT or DELETE", errMethod, r.Method))
	}
}

// cleanRel turns the URL's path into a local relative path, refusing one
// that would leave the workspace.
func cleanRel(p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("%w: path contains a NUL byte", errEscapes)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return "", fmt.Errorf("%w: %q contains \"..\"", errEscapes, p)
		}
	}
	rel := path.Clean("/" + p)[1:]
	if rel == "" {
		return ".", nil
	}
	if !filepath.IsLocal(rel) {
		return "", fmt.Errorf("%w: %q is not a path inside the workspace", errEscapes, p)
	}
	return rel, nil
}

func (s *Service) getFile(w http.ResponseWriter, r *http.Request, root *os.Root, rel string) {
	st, err := root.Stat(rel)
	if err != nil {
		writeError(w, fileError(err))
		return
	}
	if st.IsDir() {
		f, err := root.Open(rel)
		if err != nil {
			writeError(w, fileError(err))
			return
		}
		defer f.Close()
		ents, err := f.ReadDir(-1)
		if err != nil {
			writeError(w, err)
			return
		}
		out := make([]client.FileInfo, 0, len(ents))
		for _, e := range ents {
			info, err := e.Info()
			if err != nil {
				continue
			}
			out = append(out, client.FileInfo{Name: e.Name(), Type: fileType(info.Mode()), Size: info.Size(), Mode: info.Mode().String(), ModTime: info.ModTime().UTC()})
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		w.Header().Set("X-Patina-File-Type", "dir")
		writeJSON(w, http.StatusOK, out)
		return
	}
	if !st.Mode().IsRegular() {
		writeError(w, fmt.Errorf("%w: %s is not a regular file", errInvalid, rel))
		return
	}
	f, err := root.Open(rel)
	if err != nil {
		writeError(w, fileError(err))
		return
	}
	defer f.Close()
	w.Header().Set("X-Patina-File-Type", "file")
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, r, "", st.ModTime(), f)
}

func (s *Service) putFile(w http.ResponseWriter, r *http.Request, root *os.Root, rel string) {
	if rel == "." {
		writeError(w, fmt.Errorf("%w: a file path is required", errInvalid))
		return
	}
	if dir := path.Dir(rel); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			writeError(w, fileError(err))
			return
		}
	}
	existed := false
	mode := fs.FileMode(0o644)
	if st, err := root.Stat(rel); err == nil {
		if st.IsDir() {
			writeError(w, fmt.Errorf("%w: %s is a directory", errInvalid, rel))
			return
		}
		existed, mode = true, st.Mode().Perm()
	} else if !errors.Is(err, fs.ErrNotExist) {
		writeError(w, fileError(err))
		return
	}
	// Write beside it, then rename: a failed upload leaves the old file.
	tmp := path.Join(path.Dir(rel), ".patina-upload-"+randomHex(6))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		writeError(w, fileError(err))
		return
	}
	n, err := io.Copy(f, http.MaxBytesReader(w, r.Body, s.cfg.MaxFileBytes))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, rel)
	}
	if err != nil {
		_ = root.Remove(tmp)
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			err = fmt.Errorf("%w: files are limited to %d bytes", errTooLarge, s.cfg.MaxFileBytes)
		}
		writeError(w, fileError(err))
		return
	}
	code := http.StatusCreated
	if existed {
		code = http.StatusOK
	}
	writeJSON(w, code, map[string]any{"path": rel, "size": n})
}

func fileType(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "dir"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m.IsRegular():
		return "file"
	}
	return "other"
}
