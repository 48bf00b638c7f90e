package sidecar

import (
	"fmt"
	"net/http"

	"github.com/patina-dev/patina/sidecar/client"
	"github.com/patina-dev/patina/sidecar/workspace"
)

func (s *Service) handleDiff(w http.ResponseWriter, r *http.Request) {
	d, err := s.mgr.Diff(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, client.Diff{
		Base: d.Base, Commit: d.Commit, Text: d.Text, Files: fileStats(d.Files),
		Truncated: d.Truncated, FilesTruncated: d.FilesTruncated, Uncommitted: d.Uncommitted, Repaired: d.Repaired,
	})
}

func (s *Service) handleCommit(w http.ResponseWriter, r *http.Request) {
	var req client.CommitRequest
	if err := decode(w, r, &req, s.cfg.MaxBodyBytes, false); err != nil {
		writeError(w, err)
		return
	}
	if req.Message == "" {
		writeError(w, fmt.Errorf("%w: message is required", errInvalid))
		return
	}
	creq := workspace.CommitRequest{Message: req.Message}
	if req.AuthorName != "" || req.AuthorEmail != "" {
		if req.AuthorName == "" || req.AuthorEmail == "" {
			writeError(w, fmt.Errorf("%w: author_name and author_email go together", errInvalid))
			return
		}
		creq.Author = &workspace.Signature{Name: req.AuthorName, Email: req.AuthorEmail}
	}
	res, err := s.mgr.Commit(r.Context(), r.PathValue("id"), creq)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, client.CommitResult{Commit: res.Commit, Committed: res.Committed, Reviewed: res.Reviewed, Repaired: res.Repaired})
}

func (s *Service) handleMerge(w http.ResponseWriter, r *http.Request) {
	var req client.MergeRequest
	if err := decode(w, r, &req, s.cfg.MaxBodyBytes, true); err != nil {
		writeError(w, err)
		return
	}
	res, err := s.mgr.Merge(r.Context(), r.PathValue("id"), workspace.MergeRequest{Into: req.Into, Commit: req.Commit})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, client.MergeResult{
		Into: res.Into, Previous: res.Previous, Commit: res.Commit, Merged: res.Merged,
		FastForward: res.FastForward, UpToDate: res.UpToDate, Uncommitted: res.Uncommitted,
	})
}

func (s *Service) handleApply(w http.ResponseWriter, r *http.Request) {
	var none struct{}
	if err := decode(w, r, &none, s.cfg.MaxBodyBytes, true); err != nil {
		writeError(w, err)
		return
	}
	res, err := s.mgr.Apply(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, client.ApplyResult{Dir: res.Dir, Files: fileStats(res.Files)})
}

func (s *Service) handleLog(w http.ResponseWriter, r *http.Request) {
	evs, err := s.mgr.Log(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]client.LogEntry, 0, len(evs))
	for _, ev := range evs {
		out = append(out, client.LogEntry{Time: ev.Time, Kind: ev.Kind, ExitCode: ev.ExitCode, Message: ev.Message, Line: ev.Line})
	}
	writeJSON(w, http.StatusOK, out)
}

func fileStats(fs []workspace.FileStat) []client.FileStat {
	out := make([]client.FileStat, 0, len(fs))
	for _, f := range fs {
		out = append(out, client.FileStat{Path: f.Path, OldPath: f.OldPath, Status: string(f.Status), Added: f.Added, Deleted: f.Deleted, Binary: f.Binary})
	}
	return out
}
