package worktree

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Merge merges the workspace branch as last recorded (Record; uncommitted
// work is never included) into a local branch of the user's repository,
// by default the branch the workspace was created from (ErrNoTarget if it
// was created from a detached HEAD, a tag or a commit). With
// MergeRequest.Commit set, it merges exactly that commit (what the user
// reviewed), which must be the recorded tip or one of its ancestors since
// the base commit, else ErrNotOnBranch: commits the workspace recorded
// after it are left out.
//
// The merge is computed without touching any working tree (git merge-tree
// --write-tree); a conflict fails with ErrConflict and leaves the
// repository exactly as it was. Otherwise the target moves to the
// workspace tip (fast-forward: exactly the workspace's commits are added)
// or to a new merge commit. If the target is checked out in one of the
// user's working trees, that tree and its index are updated too, after
// refusing with ErrDirty if its uncommitted changes (or untracked files)
// touch a file the merge changes, or it is in the middle of a merge,
// rebase, cherry-pick or revert; untouched local changes are kept.
func (r *Repo) Merge(ctx context.Context, nameOrID string, req MergeRequest) (MergeResult, error) {
	res, err := r.merge(ctx, nameOrID, req)
	if err != nil {
		return MergeResult{}, fmt.Errorf("merge %s: %w", nameOrID, err)
	}
	return res, nil
}

func (r *Repo) merge(ctx context.Context, nameOrID string, req MergeRequest) (MergeResult, error) {
	var into string
	if req.Into != "" {
		var err error
		if into, err = validateBranch(req.Into); err != nil {
			return MergeResult{}, err
		}
	}
	if req.Commit != "" {
		if err := r.format.checkOID("commit", req.Commit); err != nil {
			return MergeResult{}, err
		}
	}
	unlock, err := r.lock.lock(ctx)
	if err != nil {
		return MergeResult{}, err
	}
	defer unlock()
	ws, err := r.lookup(ctx, nameOrID)
	if err != nil {
		return MergeResult{}, err
	}
	if ws.Head == "" {
		return MergeResult{}, fmt.Errorf("%w: branch %s has been deleted", ErrNotFound, ws.Branch)
	}
	head := ws.Head
	if req.Commit != "" && req.Commit != ws.Head {
		if err := r.checkOnBranch(ctx, ws, req.Commit); err != nil {
			return MergeResult{}, err
		}
		head = req.Commit
	}
	if into == "" {
		if !strings.HasPrefix(ws.BaseRef, "refs/heads/") {
			from := ws.BaseRef
			if from == "" {
				from = "a detached HEAD or commit " + ws.BaseCommit
			}
			return MergeResult{}, fmt.Errorf("%w: workspace was created from %s, not a local branch; name the branch to merge into (patina ws merge %s --into BRANCH; \"into\" in the API)", ErrNoTarget, from, ws.Name)
		}
		into = ws.BaseRef
	}
	if into == branchRef(ws.Name) {
		return MergeResult{}, fmt.Errorf("%w: cannot merge %s into itself", ErrNoTarget, ws.Branch)
	}
	old, err := r.revParse(ctx, nil, into+"^{commit}")
	if err != nil {
		return MergeResult{}, fmt.Errorf("target branch %s: %w", into, err)
	}
	res := MergeResult{Into: into, Previous: old, Commit: old, Merged: head}

	if head == ws.BaseCommit || ws.Legacy && head == ws.Anchor {
		res.UpToDate = true // the agent has recorded no commit: nothing to merge
		return res, nil
	}
	contained, err := r.isAncestor(ctx, nil, head, old)
	if err != nil {
		return MergeResult{}, err
	}
	if contained {
		res.UpToDate = true
		return res, nil
	}

	op := fmt.Sprintf("merge %s into %s", ws.Branch, into)
	ff, err := r.isAncestor(ctx, nil, old, head)
	if err != nil {
		return MergeResult{}, err
	}
	newTip := head
	if !ff || req.NoFastForward {
		tree, conflicts, err := r.mergeTree(ctx, old, head)
		if err != nil {
			return MergeResult{}, err
		}
		if len(conflicts) > 0 {
			target := strings.TrimPrefix(into, "refs/heads/")
			return MergeResult{}, &FilesError{Kind: ErrConflict, Op: op, Files: conflicts, Detail: fmt.Sprintf(
				"nothing was changed; %s changed these files since the workspace's base. Resolve it in your repository (git switch %s && git merge %s), or change the files in the workspace to fit %s's version, commit, and merge again",
				target, target, ws.Branch, target)}
		}
		msg := req.Message
		if strings.TrimSpace(msg) == "" {
			msg = fmt.Sprintf("Merge patina workspace '%s' into %s\n", ws.Name, strings.TrimPrefix(into, "refs/heads/"))
		}
		c := r.cmd(nil, "commit-tree", tree, "-p", old, "-p", head, "-F", "-")
		c.stdin = strings.NewReader(msg)
		out, err := r.git.run(ctx, c)
		if err != nil {
			return MergeResult{}, fmt.Errorf("merge commit: %w", err)
		}
		newTip = strings.TrimSpace(string(out))
	}
	if err := r.advance(ctx, op, into, old, newTip); err != nil {
		return MergeResult{}, err
	}
	res.Commit, res.FastForward = newTip, newTip == head

	how := "merge commit"
	if res.FastForward {
		how = "fast-forward"
	}
	msg := fmt.Sprintf("into %s at %s (%s)", into, newTip, how)
	if head != ws.Head {
		msg += " of commit " + head
	}
	r.logEvent(ctx, ws, Event{Kind: EventMerged, Message: msg})
	r.logger.Info("workspace merged", "workspace", ws.Name, "into", into, "merged", head, "commit", newTip, "fast_forward", res.FastForward)
	return res, nil
}

// checkOnBranch refuses, with ErrNotOnBranch, a commit that is not on the
// workspace's branch as recorded: an ancestor of its tip that descends
// from its base commit (or is it).
func (r *Repo) checkOnBranch(ctx context.Context, ws Workspace, commit string) error {
	notOn := fmt.Errorf("%w: commit %s is not on %s (at %s since %s)", ErrNotOnBranch, commit, ws.Branch, ws.Head, ws.BaseCommit)
	types, err := r.objectTypes(ctx, nil, []string{commit})
	if err != nil {
		return err
	}
	if types[commit] != "commit" {
		return notOn
	}
	for _, pair := range [][2]string{{commit, ws.Head}, {ws.BaseCommit, commit}} {
		ok, err := r.isAncestor(ctx, nil, pair[0], pair[1])
		if err != nil {
			return err
		}
		if !ok {
			return notOn
		}
	}
	return nil
}

// mergeTree merges two commits in the object database only. It returns the
// merged tree, or the conflicted paths.
func (r *Repo) mergeTree(ctx context.Context, ours, theirs string) (tree string, conflicts []string, err error) {
	out, err := r.git.run(ctx, r.cmd(nil, "merge-tree", "--write-tree", "--name-only", "-z", "--no-messages", ours, theirs))
	if err != nil && exitCode(err) != 1 { // 1: conflicts, reported on stdout
		return "", nil, err
	}
	tree, conflicts, perr := parseMergeTreeZ(string(out))
	if perr != nil {
		return "", nil, perr
	}
	if err != nil && len(conflicts) == 0 {
		return "", nil, err
	}
	return tree, conflicts, nil
}

// advance moves branch ref from old to newTip, a descendant of old. Where
// ref is checked out (see checkedOut), that working tree follows as `git
// merge --ff-only` would, after checkClean; elsewhere only the ref moves
// (compare-and-swap on old).
func (r *Repo) advance(ctx context.Context, op, ref, old, newTip string) error {
	dir, env, err := r.checkedOut(ctx, ref)
	if err != nil {
		return err
	}
	if dir == "" {
		if _, err := r.run(ctx, "update-ref", "-m", "patina: "+op, ref, newTip, old); err != nil {
			return fmt.Errorf("update %s: %w", ref, err)
		}
		return nil
	}
	touched, added, err := r.changes(ctx, old, newTip)
	if err != nil {
		return err
	}
	if err := r.checkClean(ctx, op, dir, env, touched, added, false); err != nil {
		return err
	}
	if _, err := r.git.run(ctx, gitCmd{
		dir:  dir,
		args: []string{"merge", "--ff-only", "--no-autostash", "--no-verify-signatures", "--no-stat", "--quiet", newTip},
		env:  append(slices.Clip(env), "GIT_REFLOG_ACTION=patina: "+op),
	}); err != nil {
		return fmt.Errorf("fast-forward %s in %s: %w", ref, dir, err)
	}
	return nil
}

// changes lists the paths that differ between two tree-ishes, and those
// of them that are added.
func (r *Repo) changes(ctx context.Context, from, to string) (touched, added []string, err error) {
	out, err := r.run(ctx, "diff-tree", "-r", "--no-renames", "--no-textconv", "--no-ext-diff", "--name-status", "-z", from, to)
	if err != nil {
		return nil, nil, err
	}
	files, err := parseNameStatusZ(out)
	if err != nil {
		return nil, nil, err
	}
	for _, f := range files {
		touched = append(touched, f.Path)
		if f.Status == StatusAdded {
			added = append(added, f.Path)
		}
	}
	return touched, added, nil
}

// checkClean refuses with ErrDirty when the working tree at dir is in the
// middle of a merge, rebase, cherry-pick or revert, has uncommitted changes
// (only unstaged ones if stagedOK) or untracked files at (or above, or
// below) any touched path, or has anything at all (an ignored file, say)
// where an added path goes. It reads the working tree without writing its
// index.
func (r *Repo) checkClean(ctx context.Context, op, dir string, env []string, touched, added []string, stagedOK bool) error {
	out, err := r.git.run(ctx, gitCmd{dir: dir, env: env, args: []string{"rev-parse",
		"--git-path", "MERGE_HEAD", "--git-path", "CHERRY_PICK_HEAD", "--git-path", "REVERT_HEAD",
		"--git-path", "rebase-merge", "--git-path", "rebase-apply"}})
	if err != nil {
		return err
	}
	paths := strings.TrimSpace(string(out))
	for _, p := range strings.Split(paths, "\n") {
		if p == "" {
			continue
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if _, err := os.Lstat(p); err == nil {
			return &FilesError{Kind: ErrDirty, Op: op, Dir: dir, Detail: fmt.Sprintf("%s is in progress; finish or abort it first", filepath.Base(p))}
		}
	}
	out, err = r.git.run(ctx, gitCmd{dir: dir, env: env, args: []string{"status", "--porcelain=v1", "-z", "--no-renames", "--untracked-files=all", "--ignore-submodules=none"}})
	if err != nil {
		return err
	}
	in := overlapping(touched, parseStatusZ(string(out), stagedOK))
	for _, p := range added {
		if _, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(p))); err == nil && !slices.Contains(in, p) {
			in = append(in, p)
		}
	}
	sort.Strings(in)
	if len(in) > 0 {
		return &FilesError{Kind: ErrDirty, Op: op, Dir: dir, Files: in, Detail: "uncommitted changes or untracked files where the operation writes; commit, stash or move them first"}
	}
	return nil
}

// overlapping returns the dirty paths that equal a touched path or lie
// above or below one (a file where a directory must go, or the reverse).
// Paths are git's: relative, '/'-separated.
func overlapping(touched, dirty []string) []string {
	files, dirs := map[string]bool{}, map[string]bool{}
	for _, t := range touched {
		files[t] = true
		for d := path.Dir(t); d != "." && d != "/"; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	var in []string
	for _, p := range dirty {
		hit := files[p] || dirs[p]
		for d := path.Dir(p); !hit && d != "." && d != "/"; d = path.Dir(d) {
			hit = files[d]
		}
		if hit {
			in = append(in, p)
		}
	}
	sort.Strings(in)
	return in
}
