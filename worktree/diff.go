package worktree

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Diff returns a workspace's change against its base (see diffBase): the
// tree of req.Snapshot (by default req.Head, by default the recorded tip)
// as unified diff text and a per-file summary, both bounded. Objects the
// repository lacks are read from req.Source into a quarantine that is
// removed afterwards: Diff writes nothing to the user's repository.
// Diff.Commit is the Head diffed; once recorded, it is what Merge merges
// (pin it with MergeRequest.Commit). Diff.Uncommitted says the snapshot
// holds work beyond Head, which Merge would not take.
func (r *Repo) Diff(ctx context.Context, nameOrID string, req DiffRequest) (Diff, error) {
	d, err := r.diff(ctx, nameOrID, req)
	if err != nil {
		return Diff{}, fmt.Errorf("diff %s: %w", nameOrID, err)
	}
	return d, nil
}

func (r *Repo) diff(ctx context.Context, nameOrID string, req DiffRequest) (Diff, error) {
	ws, err := r.lookup(ctx, nameOrID)
	if err != nil {
		return Diff{}, err
	}
	head, snap, err := r.headAndSnapshot(ws, req.Head, req.Snapshot)
	if err != nil {
		return Diff{}, err
	}
	wants := []string{head}
	if snap != head {
		wants = append(wants, snap)
	}
	q, err := r.fetch(ctx, req.Source, wants, r.haves(ctx, ws))
	if err != nil {
		return Diff{}, err
	}
	defer q.remove()
	env := q.envOf()
	if err := r.checkSnapshot(ctx, env, head, snap); err != nil {
		return Diff{}, err
	}
	base, err := r.diffBase(ctx, env, ws, head)
	if err != nil {
		return Diff{}, err
	}
	lim := diffLimits{text: req.MaxText, files: req.MaxFiles}
	if lim.text <= 0 {
		lim.text = DefaultMaxDiffText
	}
	if lim.files <= 0 {
		lim.files = DefaultMaxDiffFiles
	}
	tree, err := r.revParse(ctx, env, snap+"^{tree}")
	if err != nil {
		return Diff{}, err
	}
	headTree, err := r.revParse(ctx, env, head+"^{tree}")
	if err != nil {
		return Diff{}, err
	}
	d, err := r.diffTrees(ctx, env, base, tree, lim)
	if err != nil {
		return Diff{}, err
	}
	d.Commit, d.Uncommitted = head, tree != headTree
	return d, nil
}

// headAndSnapshot applies the defaults of DiffRequest's Head and Snapshot
// and validates them.
func (r *Repo) headAndSnapshot(ws Workspace, head, snap string) (string, string, error) {
	if head == "" {
		if ws.Head == "" {
			return "", "", fmt.Errorf("%w: branch %s has been deleted", ErrNotFound, ws.Branch)
		}
		head = ws.Head
	}
	if snap == "" {
		snap = head
	}
	if err := r.format.checkOID("head", head); err != nil {
		return "", "", err
	}
	if err := r.format.checkOID("snapshot", snap); err != nil {
		return "", "", err
	}
	return head, snap, nil
}

// checkSnapshot refuses a snapshot that is not head itself or a commit
// whose only parent is head: Diff.Uncommitted must mean what it says.
func (r *Repo) checkSnapshot(ctx context.Context, env []string, head, snap string) error {
	if snap == head {
		return nil
	}
	// snap is a checked object id: no option can hide in it (and
	// rev-parse would echo --end-of-options).
	parents, err := r.runEnv(ctx, env, "rev-parse", snap+"^@")
	if err != nil {
		return err
	}
	if parents != head {
		return fmt.Errorf("%w: snapshot %s is not a child of head %s", ErrRejected, snap, head)
	}
	return nil
}

// diffBase is what a workspace is diffed against: its base commit or,
// once the base ref and head share later history (the agent merged the
// base branch in, or the workspace was merged into it), their merge base,
// as in `git diff <base-ref>...patina/<name>`. So Diff shows the
// workspace's own changes that the base ref does not have yet.
func (r *Repo) diffBase(ctx context.Context, env []string, ws Workspace, head string) (string, error) {
	if ws.BaseRef == "" || head == "" {
		return ws.BaseCommit, nil
	}
	tip, err := r.revParse(ctx, env, ws.BaseRef+"^{commit}")
	if errors.Is(err, ErrNotFound) {
		return ws.BaseCommit, nil
	}
	if err != nil {
		return "", err
	}
	mb, err := r.runEnv(ctx, env, "merge-base", tip, head)
	if exitCode(err) == 1 { // no common ancestor
		return ws.BaseCommit, nil
	}
	if err != nil {
		return "", err
	}
	if mb == ws.BaseCommit {
		return mb, nil
	}
	later, err := r.isAncestor(ctx, env, ws.BaseCommit, mb)
	if err != nil || !later {
		return ws.BaseCommit, err
	}
	return mb, nil
}

// diffLimits bound what diffTrees reads from git; text 0 means no text.
type diffLimits struct {
	text, files int
}

// diffOpts are passed to every diff of workspace content: no textconv
// filters and no external diff drivers run on it.
var diffOpts = []string{"-r", "-M", "--no-textconv", "--no-ext-diff", "-z"}

// diffTrees compares two tree-ishes: per-file summary (at most lim.files)
// and unified diff text (at most lim.text bytes, git is stopped there),
// streaming git's output so memory stays bounded however large the files.
func (r *Repo) diffTrees(ctx context.Context, env []string, from, to string, lim diffLimits) (Diff, error) {
	d := Diff{Base: from, Tree: to}
	var files []FileStat
	err := r.git.stream(ctx, r.cmd(env, append(append([]string{"diff-tree"}, diffOpts...), "--name-status", from, to)...), func(rd io.Reader) error {
		var more bool
		var err error
		files, more, err = readNameStatusZ(rd, lim.files)
		if err == nil && more {
			d.FilesTruncated = true
			return errStopped
		}
		return err
	})
	if err != nil {
		return d, err
	}
	var stats map[string]numstat
	err = r.git.stream(ctx, r.cmd(env, append(append([]string{"diff-tree"}, diffOpts...), "--numstat", from, to)...), func(rd io.Reader) error {
		var err error
		stats, err = readNumstatZ(rd, len(files))
		if err == nil {
			return errStopped
		}
		return err
	})
	if err != nil {
		return d, err
	}
	for i := range files {
		ns := stats[files[i].Path]
		files[i].Added, files[i].Deleted, files[i].Binary = ns.added, ns.deleted, ns.binary
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	d.Files = files
	if lim.text > 0 && len(files) > 0 {
		var text strings.Builder
		err := r.git.stream(ctx, r.cmd(env, "diff-tree", "-r", "-M", "--no-textconv", "--no-ext-diff", "-p", "--no-color", from, to), func(rd io.Reader) error {
			n, err := io.Copy(&text, io.LimitReader(rd, int64(lim.text)+1))
			if err != nil {
				return err
			}
			if n > int64(lim.text) {
				d.Truncated = true
				return errStopped
			}
			return nil
		})
		if err != nil {
			return d, err
		}
		s := text.String()
		if d.Truncated {
			s = s[:lim.text]
			// End on a line if there is one to end on.
			if i := strings.LastIndexByte(s, '\n'); i >= 0 {
				s = s[:i+1]
			}
		}
		d.Text = s
	}
	return d, nil
}
