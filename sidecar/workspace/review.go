package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/patina-dev/patina/worktree"
)

// A merge takes what its user reviewed and nothing else. The sidecar keeps,
// per workspace, what the last diff answer showed (review.json in the
// workspace's state directory, so a restart keeps it): the commit it was
// of and the tree it showed (the commit's own, or, with uncommitted work,
// the snapshot's). A merge that names no commit merges that commit, and
// refuses while the workspace's HEAD is elsewhere (the workspace moved on
// since) or when what was shown held uncommitted work (a merge records
// nothing: commit it first). A commit answer carries the review over to
// its commit only when that commit records exactly what was shown: the
// same tree, on the reviewed commit (a commit before any diff is itself
// what was shown: its answer names it). Anything the workspace did after the
// diff (a background job's commit, a file written meanwhile) makes the
// commit's tree differ, and so needs a new look.

// review is what a workspace's user was last shown of its work.
type review struct {
	// Commit is the workspace's HEAD the answer showed (full id).
	Commit string `json:"commit"`
	// Tree is the tree the answer showed: Commit's, or the snapshot's of
	// Commit plus uncommitted work.
	Tree string `json:"tree"`
	// Uncommitted: Tree holds work not committed on Commit.
	Uncommitted bool `json:"uncommitted,omitempty"`
	// By is what showed it: "diff", or "commit" (a commit that recorded
	// exactly what a diff showed).
	By string    `json:"by"`
	At time.Time `json:"at"`
}

const (
	reviewFile = "review.json"
	// maxReviewFile bounds the read of review.json (the sidecar's own
	// file; a few hundred bytes).
	maxReviewFile = 64 << 10
)

// ErrUnreviewed: a merge that names no commit found nothing reviewed to
// merge, or the workspace changed since it was reviewed.
var ErrUnreviewed = errors.New("not reviewed")

// reviewError is a refusal whose message says all the user needs; it
// matches its kind (ErrUnreviewed, ErrInvalid) with errors.Is.
type reviewError struct {
	kind error
	msg  string
}

func (e *reviewError) Error() string { return e.msg }
func (e *reviewError) Unwrap() error { return e.kind }

// shortCommit is how patina prints a commit: its first 10 hex digits.
func shortCommit(oid string) string {
	if len(oid) > 10 {
		return oid[:10]
	}
	return oid
}

// readReview returns the workspace's review, nil when there is none.
func (w *workspace) readReview() (*review, error) {
	w.reviewMu.Lock()
	defer w.reviewMu.Unlock()
	return w.readReviewLocked()
}

func (w *workspace) readReviewLocked() (*review, error) {
	f, err := os.Open(filepath.Join(w.dir, reviewFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read what was reviewed: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxReviewFile+1))
	if err != nil {
		return nil, fmt.Errorf("read what was reviewed: %w", err)
	}
	var rv review
	if len(b) > maxReviewFile || json.Unmarshal(b, &rv) != nil || rv.Commit == "" {
		// Unreadable: as if nothing was reviewed (the user looks again).
		w.m.log.Warn("review.json is unreadable; ignored", "workspace_id", w.id())
		return nil, nil
	}
	return &rv, nil
}

// setReview records what an answer showed. With prev set, only if the
// review is still prev (a diff answered meanwhile wins).
func (w *workspace) setReview(rv review, prev *review) error {
	w.reviewMu.Lock()
	defer w.reviewMu.Unlock()
	if prev != nil {
		cur, err := w.readReviewLocked()
		if err != nil {
			return err
		}
		if cur == nil || *cur != *prev {
			return nil
		}
	}
	rv.At = time.Now().UTC()
	if err := writeJSONFile(filepath.Join(w.dir, reviewFile), rv); err != nil {
		return fmt.Errorf("record what was reviewed: %w", err)
	}
	return nil
}

// reviewDiff records what a diff answer showed.
func (w *workspace) reviewDiff(d worktree.Diff) error {
	return w.setReview(review{Commit: d.Commit, Tree: d.Tree, Uncommitted: d.Uncommitted, By: "diff"}, nil)
}

// reviewCommit carries the review over to a recorded commit that records
// exactly what was reviewed: the reviewed tree, on the reviewed commit (or
// the reviewed commit itself). With no review yet (a commit before any
// diff), the commit its answer names is what its user was shown. It
// reports whether the commit is now the review.
func (w *workspace) reviewCommit(ctx context.Context, repo *worktree.Repo, commit string) (bool, error) {
	rv, err := w.readReview()
	if err != nil {
		return false, err
	}
	if rv == nil {
		ci, err := repo.ReadCommit(ctx, commit)
		if err != nil {
			return false, err
		}
		return true, w.setReview(review{Commit: commit, Tree: ci.Tree, By: "commit"}, nil)
	}
	ci, err := repo.ReadCommit(ctx, commit)
	if err != nil {
		return false, err
	}
	onReviewed := commit == rv.Commit || len(ci.Parents) == 1 && ci.Parents[0] == rv.Commit
	if ci.Tree != rv.Tree || !onReviewed {
		return false, nil
	}
	if commit == rv.Commit && !rv.Uncommitted {
		return true, nil // nothing new: the same review
	}
	return true, w.setReview(review{Commit: commit, Tree: ci.Tree, By: "commit"}, rv)
}

// reviewedCommit is the commit a merge that names none takes: the one
// last reviewed, if the workspace's HEAD (head) is still there and what
// was shown needs no commit first.
func (w *workspace) reviewedCommit(head string) (string, error) {
	name := w.name()
	rv, err := w.readReview()
	if err != nil {
		return "", err
	}
	switch {
	case rv == nil:
		return "", &reviewError{ErrUnreviewed, fmt.Sprintf(
			"nothing of workspace %s has been reviewed yet: look at the diff first (patina ws diff %s), then merge", name, name)}
	case head != rv.Commit:
		return "", &reviewError{ErrUnreviewed, fmt.Sprintf(
			"workspace %s changed since you reviewed it at %s (it is at %s now): look at the diff again (patina ws diff %s) and merge",
			name, shortCommit(rv.Commit), shortCommit(head), name)}
	case rv.Uncommitted:
		return "", &reviewError{ErrUnreviewed, fmt.Sprintf(
			"the diff of workspace %s you reviewed at %s includes uncommitted work, which a merge does not record: "+
				"commit it first (patina ws commit %s -m MESSAGE; the commit keeps your review if it records exactly what you saw), then merge",
			name, shortCommit(rv.Commit), name)}
	}
	return rv.Commit, nil
}
