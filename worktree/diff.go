package worktree

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/uuid"
)

// Diff returns a workspace's change against its base (see diffBase):
// committed work, uncommitted changes and untracked files (not ignored
// ones), as unified diff text and a per-file summary; Diff.Base says which
// commit it is against. It stages nothing: the
// worktree's state is snapshotted through a temporary index, so neither the
// user's index nor the workspace's own is touched.
func (r *Repo) Diff(ctx context.Context, nameOrID string) (Diff, error) {
	ws, err := r.lookup(ctx, nameOrID)
	if err != nil {
		return Diff{}, fmt.Errorf("diff %s: %w", nameOrID, err)
	}
	if ws.Missing {
		return Diff{}, fmt.Errorf("diff %s: %w: %s (repair or delete the workspace)", nameOrID, ErrMissing, ws.Path)
	}
	tree, err := r.snapshot(ctx, ws.Path)
	if err != nil {
		return Diff{}, fmt.Errorf("diff %s: %w", nameOrID, err)
	}
	base, err := r.diffBase(ctx, ws)
	if err != nil {
		return Diff{}, fmt.Errorf("diff %s: %w", nameOrID, err)
	}
	d, err := r.diffTrees(ctx, base, tree, true)
	if err != nil {
		return Diff{}, fmt.Errorf("diff %s: %w", nameOrID, err)
	}
	return d, nil
}

// diffBase is what a workspace is diffed against: its base commit or,
// once the base ref and the workspace branch share later history (the
// agent merged the base branch in, or the workspace was merged into it),
// their merge base, as in `git diff <base-ref>...patina/<name>`. So Diff
// shows the workspace's own changes that the base ref does not have yet.
func (r *Repo) diffBase(ctx context.Context, ws Workspace) (string, error) {
	if ws.BaseRef == "" || ws.Head == "" {
		return ws.BaseCommit, nil
	}
	tip, err := r.revParse(ctx, r.root, ws.BaseRef+"^{commit}")
	if errors.Is(err, ErrNotFound) {
		return ws.BaseCommit, nil
	}
	if err != nil {
		return "", err
	}
	mb, err := r.run(ctx, "merge-base", tip, ws.Head)
	if exitCode(err) == 1 { // no common ancestor
		return ws.BaseCommit, nil
	}
	if err != nil {
		return "", err
	}
	if mb == ws.BaseCommit {
		return mb, nil
	}
	later, err := r.isAncestor(ctx, ws.BaseCommit, mb)
	if err != nil || !later {
		return ws.BaseCommit, err
	}
	return mb, nil
}

// snapshot writes the tree of everything in the worktree at dir that git
// would add with `git add -A` (tracked, modified, deleted and untracked
// files; not ignored ones). It works on a copy of the worktree's index, so
// the worktree's own staging area is left as the agent made it.
func (r *Repo) snapshot(ctx context.Context, dir string) (string, error) {
	return r.indexTree(ctx, dir, true)
}

// indexTree writes the tree of the index of the working tree at dir, after
// `git add -A` if addAll, using a copy of the index so the real one is not
// written. (write-tree alone would rewrite the index's cache-tree.)
func (r *Repo) indexTree(ctx context.Context, dir string, addAll bool) (string, error) {
	gitDir, err := r.git.out(ctx, dir, "rev-parse", "--absolute-git-dir")
	if err != nil {
		return "", fmt.Errorf("snapshot: %w", err)
	}
	tmp := filepath.Join(gitDir, "patina-index-"+uuid.NewString())
	defer os.Remove(tmp)
	defer os.Remove(tmp + ".lock")
	// Copying keeps the stat cache, so git does not rehash every file; the
	// copy keeps the index's mtime too (see copyFile).
	if err := copyFile(tmp, filepath.Join(gitDir, "index")); err != nil {
		return "", fmt.Errorf("snapshot: copy index: %w", err)
	}
	env := []string{"GIT_INDEX_FILE=" + tmp}
	if addAll {
		if _, err := r.git.run(ctx, gitCmd{dir: dir, args: []string{"add", "-A"}, env: env}); err != nil {
			return "", fmt.Errorf("snapshot: %w", err)
		}
	}
	out, err := r.git.run(ctx, gitCmd{dir: dir, args: []string{"write-tree"}, env: env})
	if err != nil {
		return "", fmt.Errorf("snapshot: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// diffTrees compares two tree-ishes: per-file summary and, when withText,
// unified diff text.
func (r *Repo) diffTrees(ctx context.Context, from, to string, withText bool) (Diff, error) {
	d := Diff{Base: from, Tree: to}
	out, err := r.run(ctx, "diff-tree", "-r", "-M", "--name-status", "-z", from, to)
	if err != nil {
		return d, err
	}
	files, err := parseNameStatusZ(out)
	if err != nil {
		return d, err
	}
	out, err = r.run(ctx, "diff-tree", "-r", "-M", "--numstat", "-z", from, to)
	if err != nil {
		return d, err
	}
	stats, err := parseNumstatZ(out)
	if err != nil {
		return d, err
	}
	for i := range files {
		ns := stats[files[i].Path]
		files[i].Added, files[i].Deleted, files[i].Binary = ns.added, ns.deleted, ns.binary
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	d.Files = files
	if withText && len(files) > 0 {
		b, err := r.git.run(ctx, gitCmd{dir: r.root, args: []string{"diff-tree", "-r", "-M", "-p", "--no-color", from, to}})
		if err != nil {
			return d, err
		}
		d.Text = string(b)
	}
	return d, nil
}

// copyFile copies src to a new file dst; a missing src is not an error and
// leaves dst absent (git then starts from an empty index).
func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	// Keep the index's mtime: git's racy-clean check compares entries with
	// it. A copy with a newer mtime makes a file changed in the same second
	// as the checkout, at the same size, look unchanged.
	st, err := in.Stat()
	if err != nil {
		return err
	}
	return os.Chtimes(dst, st.ModTime(), st.ModTime())
}
