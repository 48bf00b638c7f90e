package worktree

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// A workspace on another machine than the user's repository cannot borrow
// its objects through a mount. Its objects are shipped instead: the host
// packs everything its base commit reaches (Repo.PackCommit), the agent
// stores the pack in a bare repository of its own (Inside.Receive), and
// the workspace's repository borrows from that store as it would from the
// user's objects. What comes back is checked by Record as from any
// workspace: the store is the workspace's, as untrusted as the rest.

// PackCommit writes to w a pack of every object commit reaches (its
// history, trees and blobs): what a workspace on another machine needs to
// start at commit. It is a full pack (no thin deltas), made for speed over
// size (compression 1, no delta search): the link is usually faster than
// the search.
func (r *Repo) PackCommit(ctx context.Context, commit string, w io.Writer) error {
	if err := r.format.checkOID("commit", commit); err != nil {
		return err
	}
	c := r.cmd(nil, "-c", "pack.compression=1", "pack-objects", "--stdout", "--revs", "--window=0", "--delta-base-offset", "-q")
	c.stdin = strings.NewReader(commit + "\n")
	err := r.git.stream(ctx, c, func(rd io.Reader) error {
		_, err := io.Copy(w, rd)
		return err
	})
	if err != nil {
		return fmt.Errorf("pack %s: %w", commit, err)
	}
	return nil
}

// Store is a bare repository inside a workspace that holds the objects
// shipped to it (at Dir). Inside.Init borrows from Store.Objects().
type Store struct {
	// Dir is the bare repository's directory (absolute).
	Dir string
	// GitPath is the git binary; default "git" from $PATH.
	GitPath string
}

// Objects is the store's object directory: an alternate for Init.
func (s Store) Objects() string { return filepath.Join(s.Dir, "objects") }

func (s Store) runner() (*runner, error) {
	return (&Inside{Dir: s.Dir, GitPath: s.GitPath}).runner()
}

// cmd is a git command on the bare store.
func (s Store) cmd(args ...string) gitCmd {
	return gitCmd{dir: s.Dir, args: args, env: []string{"GIT_DIR=" + s.Dir}}
}

// init makes the bare repository if it is missing, or anew if what is
// there is not one (the store is the workspace's: it may wreck it).
func (s Store) init(ctx context.Context, g *runner, format string) error {
	if !filepath.IsAbs(s.Dir) {
		return fmt.Errorf("store %q is not absolute", s.Dir)
	}
	if out, err := g.run(ctx, s.cmd("rev-parse", "--is-bare-repository")); err == nil && strings.TrimSpace(string(out)) == "true" {
		return nil
	}
	if err := os.RemoveAll(s.Dir); err != nil {
		return err
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return err
	}
	args := []string{"init", "-q", "--bare"}
	if format == "sha256" {
		args = append(args, "--object-format=sha256")
	}
	_, err := g.run(ctx, gitCmd{dir: s.Dir, args: append(args, "--", s.Dir)})
	return err
}

// Has reports whether commit is in the store (a pack received whole
// brings everything the commit reaches).
func (s Store) Has(ctx context.Context, commit string) (bool, error) {
	if err := checkOIDs("commit", []string{commit}); err != nil {
		return false, err
	}
	if fi, err := os.Lstat(filepath.Join(s.Dir, "objects")); err != nil || !fi.IsDir() {
		return false, nil
	}
	g, err := s.runner()
	if err != nil {
		return false, err
	}
	_, err = g.run(ctx, s.cmd("cat-file", "-e", commit+"^{commit}"))
	switch {
	case err == nil:
		return true, nil
	case exitCode(err) > 0:
		return false, nil
	}
	return false, err
}

// Receive stores the pack read from r (git index-pack --stdin, which
// checks each object's id as it indexes it) and checks that it brought
// commit. A pack from PackCommit is whole: the commit brings everything it
// reaches.
func (s Store) Receive(ctx context.Context, commit string, r io.Reader) error {
	if err := checkOIDs("commit", []string{commit}); err != nil {
		return err
	}
	g, err := s.runner()
	if err != nil {
		return err
	}
	format := "sha1"
	if len(commit) == 64 {
		format = "sha256"
	}
	if err := s.init(ctx, g, format); err != nil {
		return fmt.Errorf("store %s: %w", s.Dir, err)
	}
	c := s.cmd("index-pack", "--stdin")
	c.stdin = r
	if _, err := g.run(ctx, c); err != nil {
		return fmt.Errorf("store the pack in %s: %w", s.Dir, err)
	}
	if ok, err := s.Has(ctx, commit); err != nil || !ok {
		return fmt.Errorf("%w: the pack did not bring %s (%v)", ErrNotFound, commit, err)
	}
	return nil
}
