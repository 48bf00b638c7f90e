package sidecar

import (
	"errors"
	"fmt"
	"net/http"
	"unicode/utf8"

	"github.com/patina-dev/patina/sidecar/client"
	"github.com/patina-dev/patina/worktree"
)

// gitWorkspace resolves {id} to a workspace with a repository.
func (s *Service) gitWorkspace(r *http.Request) (*workspace, *worktree.Repo, error) {
	ws, err := s.lookup(r.PathValue("id"))
	if err != nil {
		return nil, nil, err
	}
	ws.mu.Lock()
	repo, name := ws.repo, ws.meta.Name
	ws.mu.Unlock()
	if repo == nil {
		return nil, nil, fmt.Errorf("%w: workspace %s was created without a repo", errNoRepository, name)
	}
	// Git operations log their own events: write the queued command events
	// first, so the log stays in order.
	ws.log.flush(r.Context())
	return ws, repo, nil
}

func (s *Service) handleDiff(w http.ResponseWriter, r *http.Request) {
	ws, repo, err := s.gitWorkspace(r)
	if err != nil {
		writeError(w, err)
		return
	}
	d, err := repo.Diff(r.Context(), ws.meta.ID)
	if err != nil {
		writeError(w, err)
		return
	}
	out := client.Diff{Base: d.Base, Text: d.Text, Files: fileStats(d.Files)}
	if len(out.Text) > s.cfg.DiffLimit {
		cut := s.cfg.DiffLimit
		for cut > 0 && !utf8.RuneStart(out.Text[cut]) {
			cut-- // never split a character
		}
		out.Text = out.Text[:cut]
		out.Truncated = true
	}
	writeJSON(w, http.StatusOK, out)
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
	ws, repo, err := s.gitWorkspace(r)
	if err != nil {
		writeError(w, err)
		return
	}
	creq := worktree.CommitRequest{Message: req.Message}
	if req.AuthorName != "" || req.AuthorEmail != "" {
		if req.AuthorName == "" || req.AuthorEmail == "" {
			writeError(w, fmt.Errorf("%w: author_name and author_email go together", errInvalid))
			return
		}
		creq.Author = &worktree.Signature{Name: req.AuthorName, Email: req.AuthorEmail}
	}
	res, err := repo.Commit(r.Context(), ws.meta.ID, creq)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, client.CommitResult{Commit: res.Commit, Committed: res.Committed})
}

func (s *Service) handleMerge(w http.ResponseWriter, r *http.Request) {
	var req client.MergeRequest
	if err := decode(w, r, &req, s.cfg.MaxBodyBytes, true); err != nil {
		writeError(w, err)
		return
	}
	ws, repo, err := s.gitWorkspace(r)
	if err != nil {
		writeError(w, err)
		return
	}
	res, err := repo.Merge(r.Context(), ws.meta.ID, worktree.MergeRequest{Into: req.Into})
	if req.Into != "" && errors.Is(err, worktree.ErrNotFound) {
		err = fmt.Errorf("%w: into: %w", errInvalid, err) // a field names nothing: 400, not 404
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, client.MergeResult{
		Into: res.Into, Previous: res.Previous, Commit: res.Commit,
		FastForward: res.FastForward, UpToDate: res.UpToDate, Uncommitted: res.Uncommitted,
	})
}

func (s *Service) handleApply(w http.ResponseWriter, r *http.Request) {
	var none struct{}
	if err := decode(w, r, &none, s.cfg.MaxBodyBytes, true); err != nil {
		writeError(w, err)
		return
	}
	ws, repo, err := s.gitWorkspace(r)
	if err != nil {
		writeError(w, err)
		return
	}
	res, err := repo.Apply(r.Context(), ws.meta.ID, worktree.ApplyRequest{})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, client.ApplyResult{Dir: res.Dir, Files: fileStats(res.Files)})
}

func (s *Service) handleLog(w http.ResponseWriter, r *http.Request) {
	ws, err := s.lookup(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	evs, err := ws.log.read(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]client.LogEntry, 0, len(evs))
	for _, ev := range evs {
		out = append(out, client.LogEntry{Time: ev.Time, Kind: ev.Kind, ExitCode: ev.ExitCode, Message: ev.Message, Line: ev.String()})
	}
	writeJSON(w, http.StatusOK, out)
}

func fileStats(fs []worktree.FileStat) []client.FileStat {
	out := make([]client.FileStat, 0, len(fs))
	for _, f := range fs {
		out = append(out, client.FileStat{Path: f.Path, OldPath: f.OldPath, Status: string(f.Status), Added: f.Added, Deleted: f.Deleted, Binary: f.Binary})
	}
	return out
}
