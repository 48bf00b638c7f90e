package worktree

import (
	"context"
	"fmt"
	"strings"
)

// Commit stages everything in the workspace (git add -A: new, modified and
// deleted files; ignored files stay out) and commits it on whatever HEAD
// is on, hooks and signing off. With nothing to commit it is a no-op:
// CommitResult.Committed is false and Commit is the unchanged HEAD. The
// host learns of the commit when the sidecar records it (Repo.Record).
func (in *Inside) Commit(ctx context.Context, req CommitRequest) (CommitResult, error) {
	res, err := in.commit(ctx, req)
	if err != nil {
		return CommitResult{}, fmt.Errorf("commit in %s: %w", in.Dir, err)
	}
	return res, nil
}

func (in *Inside) commit(ctx context.Context, req CommitRequest) (CommitResult, error) {
	var env []string
	if req.Author != nil {
		if err := validateSignature(*req.Author); err != nil {
			return CommitResult{}, err
		}
		env = []string{"GIT_AUTHOR_NAME=" + req.Author.Name, "GIT_AUTHOR_EMAIL=" + req.Author.Email}
	}
	if _, err := in.run(ctx, nil, "add", "-A"); err != nil {
		return CommitResult{}, err
	}
	// diff-index --quiet exits 0 when the index matches HEAD.
	_, err := in.run(ctx, nil, "diff-index", "--cached", "--quiet", "HEAD", "--")
	if err == nil {
		head, err := in.head(ctx)
		return CommitResult{Commit: head}, err
	}
	if exitCode(err) != 1 {
		return CommitResult{}, err
	}
	msg := req.Message
	if strings.TrimSpace(msg) == "" {
		msg = "patina: changes in the workspace"
	}
	g, err := in.runner()
	if err != nil {
		return CommitResult{}, err
	}
	c := in.cmd(env, "commit", "--quiet", "--no-verify", "--no-gpg-sign", "--cleanup=whitespace", "-F", "-")
	c.stdin = strings.NewReader(msg)
	if _, err := g.run(ctx, c); err != nil {
		return CommitResult{}, err
	}
	head, err := in.head(ctx)
	if err != nil {
		return CommitResult{}, err
	}
	return CommitResult{Commit: head, Committed: true}, nil
}
