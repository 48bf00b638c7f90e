package inside

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/sidecar/agent/wire"
	"github.com/patina-dev/patina/sidecar/mux"
)

// Files are served from Workdir through os.Root: a path that leaves it, by
// ".." or a symlink, is refused (ErrEscapes). Opening never blocks on a
// FIFO (O_NONBLOCK) and only regular files are read.

// localPath checks a path from the caller: relative, clean, inside.
func localPath(p string) (string, error) {
	if p == "" || p == "." {
		return ".", nil
	}
	if strings.IndexByte(p, 0) >= 0 || !filepath.IsLocal(p) || path.Clean(p) != p {
		return "", fmt.Errorf("%w: %q is not a clean path inside the workspace", wire.ErrEscapes, p)
	}
	return p, nil
}

// rootError classifies an os.Root error; os.Root says a path escapes only
// in its message, so this is the one place that reads it.
func rootError(err error) error {
	switch {
	case err == nil:
		return nil
	case strings.Contains(err.Error(), "path escapes from parent"):
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return fmt.Errorf("%w: %s leads out of /workspace (a link to a place outside it, say)", wire.ErrEscapes, pe.Path)
		}
		return fmt.Errorf("%w: %v", wire.ErrEscapes, err)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %v", session.ErrNotFound, err)
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENAMETOOLONG),
		errors.Is(err, syscall.ELOOP):
		return fmt.Errorf("%w: %v", session.ErrInvalid, err)
	}
	return err
}

func (s *Server) root() (*os.Root, error) {
	r, err := os.OpenRoot(s.cfg.Workdir)
	if err != nil {
		return nil, fmt.Errorf("workspace directory: %w", err)
	}
	return r, nil
}

// fileCall decodes a call's arguments into req, checks the path they name
// (*p, a field of req) and opens the workspace's root; the caller closes
// it.
func (s *Server) fileCall(args json.RawMessage, req any, p *string) (string, *os.Root, error) {
	if err := decodeArgs(args, req); err != nil {
		return "", nil, err
	}
	rel, err := localPath(*p)
	if err != nil {
		return "", nil, err
	}
	root, err := s.root()
	if err != nil {
		return "", nil, err
	}
	return rel, root, nil
}

func infoOf(name string, fi fs.FileInfo) wire.FileInfo {
	return wire.FileInfo{Name: name, Type: fileType(fi.Mode()), Size: fi.Size(), Mode: uint32(fi.Mode()), ModTime: fi.ModTime().UTC()}
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

// fileRead answers a regular file's info then its bytes, or a directory's
// listing.
func (s *Server) fileRead(st *mux.Stream, args json.RawMessage) error {
	var req wire.FileRequest
	rel, root, err := s.fileCall(args, &req, &req.Path)
	if err != nil {
		return err
	}
	defer root.Close()

	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return rootError(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.IsDir() {
		entries, err := listDir(f)
		if err != nil {
			return err
		}
		writeResult(st, wire.FileHead{FileInfo: infoOf(path.Base(rel), fi), IsDir: true, Entries: entries})
		return nil
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: %s is not a regular file (%s)", session.ErrInvalid, rel, fileType(fi.Mode()))
	}
	if err := wire.WriteHead(st, wire.FileHead{FileInfo: infoOf(path.Base(rel), fi)}); err != nil {
		return nil
	}
	if _, err := io.Copy(st, f); err != nil {
		st.Reset(err.Error())
		return nil
	}
	_ = st.CloseWrite()
	return nil
}

func listDir(f *os.File) ([]wire.FileInfo, error) {
	ents, err := f.ReadDir(wire.MaxListEntries + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if len(ents) > wire.MaxListEntries {
		return nil, fmt.Errorf("%w: the directory has more than %d entries", wire.ErrTooLarge, wire.MaxListEntries)
	}
	out := make([]wire.FileInfo, 0, len(ents))
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			continue
		}
		out = append(out, infoOf(e.Name(), fi))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (s *Server) fileList(st *mux.Stream, args json.RawMessage) error {
	var req wire.FileRequest
	rel, root, err := s.fileCall(args, &req, &req.Path)
	if err != nil {
		return err
	}
	defer root.Close()

	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_DIRECTORY, 0)
	if err != nil {
		return rootError(err)
	}
	defer f.Close()
	entries, err := listDir(f)
	if err != nil {
		return err
	}
	writeResult(st, entries)
	return nil
}

// fileWrite writes the body to a file atomically (a temporary file beside
// it, then a rename), creating parent directories.
func (s *Server) fileWrite(st *mux.Stream, args json.RawMessage) error {
	var req wire.FileWriteRequest
	rel, root, err := s.fileCall(args, &req, &req.Path)
	if err != nil {
		return err
	}
	defer root.Close()
	if rel == "." {
		return fmt.Errorf("%w: a file path is required", session.ErrInvalid)
	}
	max := req.Max
	if max <= 0 || max > s.cfg.MaxFileBytes {
		max = s.cfg.MaxFileBytes
	}
	if dir := path.Dir(rel); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return rootError(err)
		}
	}
	mode, created := fs.FileMode(0o644), true
	if fi, err := root.Lstat(rel); err == nil {
		if fi.IsDir() {
			return fmt.Errorf("%w: %s is a directory", session.ErrInvalid, rel)
		}
		if fi.Mode().IsRegular() {
			mode = fi.Mode().Perm()
		}
		created = false
	} else if !errors.Is(err, fs.ErrNotExist) {
		return rootError(err)
	}
	tmp := path.Join(path.Dir(rel), ".patina-upload-"+randomHex(6))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return rootError(err)
	}
	n, err := io.Copy(f, io.LimitReader(st, max+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n > max {
		err = fmt.Errorf("%w: files are limited to %d bytes", wire.ErrTooLarge, max)
	}
	if err == nil {
		err = root.Rename(tmp, rel)
	}
	if err != nil {
		_ = root.Remove(tmp)
		return rootError(err)
	}
	writeResult(st, wire.FileWriteResult{Size: n, Created: created})
	return nil
}

func (s *Server) fileDelete(st *mux.Stream, args json.RawMessage) error {
	var req wire.FileRequest
	rel, root, err := s.fileCall(args, &req, &req.Path)
	if err != nil {
		return err
	}
	defer root.Close()
	if rel == "." {
		return fmt.Errorf("%w: refusing to delete the workspace's root directory", session.ErrInvalid)
	}
	if _, err := root.Lstat(rel); err != nil {
		return rootError(err)
	}
	if err := root.RemoveAll(rel); err != nil {
		return rootError(err)
	}
	writeResult(st, struct{}{})
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
