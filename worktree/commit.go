package worktree

import (
	"context"
	"fmt"
	"strings"
)

// Commit stages everything in the workspace's worktree (git add -A: new,
// modified and deleted files; ignored files stay out) and commits it on the
// workspace branch, hooks and signing off. With nothing to commit it is a
// no-op: CommitResult.Committed is false and Commit is the unchanged tip.
// It refuses (ErrConflict) if the worktree is no longer on its branch, and
// ErrMissing if the worktree has vanished.
func (r *Repo) Commit(ctx context.Context, nameOrID string, req CommitRequest) (CommitResult, error) {
	res, err := r.commit(ctx, nameOrID, req)
	if err != nil {
		return CommitResult{}, fmt.Errorf("commit %s: %w", nameOrID, err)
	}
	return res, nil
}

func (r *Repo) commit(ctx context.Context, nameOrID string, req CommitRequest) (CommitResult, error) {
	var env []string
	if req.Author != nil {
		if err := validateSignature(*req.Author); err != nil {
			return CommitResult{}, err
		}
		env = []string{"GIT_AUTHOR_NAME=" + req.Author.Name, "GIT_AUTHOR_EMAIL=" + req.Author.Email}
	}
	unlock, err := r.lock.lock(ctx)
	if err != nil {
		return CommitResult{}, err
	}
	defer unlock()
	ws, err := r.lookup(ctx, nameOrID)
	if err != nil {
		return CommitResult{}, err
	}
	if ws.Missing {
		return CommitResult{}, fmt.Errorf("%w: %s (repair or delete the workspace)", ErrMissing, ws.Path)
	}
	head, err := r.git.out(ctx, ws.Path, "symbolic-ref", "-q", "HEAD")
	if err != nil && exitCode(err) != 1 {
		return CommitResult{}, err
	}
	if head != branchRef(ws.Name) {
		if head == "" {
			head = "a detached HEAD"
		}
		return CommitResult{}, fmt.Errorf("%w: worktree %s is on %s, not %s; check out the workspace branch first", ErrConflict, ws.Path, head, ws.Branch)
	}

	if _, err := r.git.out(ctx, ws.Path, "add", "-A"); err != nil {
		return CommitResult{}, err
	}
	// diff-index --quiet exits 0 when the index matches HEAD.
	same, err := r.git.test(ctx, ws.Path, "diff-index", "--cached", "--quiet", "HEAD", "--")
	if err != nil {
		return CommitResult{}, err
	}
	if same {
		tip, err := r.revParse(ctx, ws.Path, "HEAD")
		return CommitResult{Commit: tip, Committed: false}, err
	}

	msg := req.Message
	if strings.TrimSpace(msg) == "" {
		msg = "patina: changes in workspace " + ws.Name
	}
	if _, err := r.git.run(ctx, gitCmd{
		dir:   ws.Path,
		args:  []string{"commit", "--quiet", "--no-verify", "--no-gpg-sign", "--cleanup=whitespace", "-F", "-"},
		stdin: []byte(msg),
		env:   env,
	}); err != nil {
		return CommitResult{}, err
	}
	tip, err := r.revParse(ctx, ws.Path, "HEAD")
	if err != nil {
		return CommitResult{}, err
	}
	subject, _, _ := strings.Cut(strings.TrimSpace(msg), "\n")
	r.logEvent(ctx, ws, Event{Kind: EventCommitted, Message: tip + " " + subject})
	r.logger.Info("workspace committed", "workspace", ws.Name, "commit", tip)
	return CommitResult{Commit: tip, Committed: true}, nil
}
