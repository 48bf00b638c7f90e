package sidecar

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/patina-dev/patina/sidecar/client"
	"github.com/patina-dev/patina/sidecar/workspace"
)

// handleFiles serves GET (a file's bytes, or a directory's listing as
// JSON), PUT (write a file atomically, creating parents) and DELETE on the
// workspace's directory, through its agent. Paths are relative to
// /workspace; one that leaves it, by ".." or through a symlink, is refused
// with 400.
func (s *Service) handleFiles(w http.ResponseWriter, r *http.Request, id, rest string) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		f, ents, err := s.mgr.ReadFile(r.Context(), id, rest)
		if err != nil {
			writeError(w, err)
			return
		}
		if f == nil {
			out := make([]client.FileInfo, 0, len(ents))
			for _, e := range ents {
				out = append(out, fileInfo(e))
			}
			sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
			w.Header().Set("X-Patina-File-Type", "dir")
			writeJSON(w, http.StatusOK, out)
			return
		}
		defer f.Close()
		w.Header().Set("X-Patina-File-Type", "file")
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.FormatInt(f.Info.Size, 10))
		w.Header().Set("Last-Modified", f.Info.ModTime.UTC().Format(http.TimeFormat))
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			_, _ = io.Copy(w, f)
		}
	case http.MethodPut:
		limit := s.mgr.MaxFileBytes()
		res, err := s.mgr.WriteFile(r.Context(), id, rest, http.MaxBytesReader(w, r.Body, limit))
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			err = fmt.Errorf("%w: the file is larger than the limit of %d bytes (%d MiB) for one write: "+
				"write it in parts, or copy it into the workspace another way (git, a download inside it)", errTooLarge, limit, limit>>20)
		}
		if err != nil {
			writeError(w, err)
			return
		}
		code := http.StatusOK
		if res.Created {
			code = http.StatusCreated
		}
		rel := strings.Trim(rest, "/")
		writeJSON(w, code, map[string]any{"path": rel, "size": res.Size})
	case http.MethodDelete:
		if err := s.mgr.DeleteFile(r.Context(), id, rest); err != nil {
			writeError(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Allow", "GET, HEAD, PUT, DELETE")
		writeError(w, fmt.Errorf("%w: %s on files; use GET, HEAD, PUT or DELETE", errMethod, r.Method))
	}
}

func fileInfo(e workspace.FileInfo) client.FileInfo {
	return client.FileInfo{Name: e.Name, Type: e.Type, Size: e.Size, Mode: e.Mode.String(), ModTime: e.ModTime}
}
