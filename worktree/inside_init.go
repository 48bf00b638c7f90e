package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Init makes Dir an ordinary repository of its own for the workspace:
// `git init`, objects/info/alternates naming req.Alternates, branch
// req.Branch at req.Base, HEAD on it, then the files: checked out (reset
// --hard) or, with KeepFiles, left as they are with the index at Base
// (reset --mixed), so work already in the directory shows as uncommitted.
// With KeepFiles a .git file (a legacy worktree's) is replaced.
//
// Init is idempotent: on a repository it completed before (a restarted
// container), it only rewrites the alternates and leaves refs, index and
// files alone, so no work is lost. An Init interrupted half way is
// completed.
func (in *Inside) Init(ctx context.Context, req InitRequest) (InitResult, error) {
	res, err := in.init(ctx, req)
	if err != nil {
		return InitResult{}, fmt.Errorf("init %s: %w", in.Dir, err)
	}
	return res, nil
}

func (in *Inside) init(ctx context.Context, req InitRequest) (InitResult, error) {
	ref, err := validateBranch(req.Branch)
	if err != nil {
		return InitResult{}, err
	}
	if err := checkOIDs("base", []string{req.Base}); err != nil {
		return InitResult{}, err
	}
	for _, alt := range req.Alternates {
		if !filepath.IsAbs(alt) || strings.ContainsAny(alt, "\n\r\x00") {
			return InitResult{}, fmt.Errorf("alternate %q: not an absolute path on one line", alt)
		}
	}
	if req.Identity != nil {
		if err := validateSignature(*req.Identity); err != nil {
			return InitResult{}, err
		}
	}
	if _, err := in.runner(); err != nil {
		return InitResult{}, err
	}
	if err := os.MkdirAll(in.Dir, 0o755); err != nil {
		return InitResult{}, err
	}
	if req.Reseed {
		if _, err := os.Lstat(in.gitDir()); err == nil {
			if _, err := in.head(ctx); err != nil {
				// Broken beyond use: what it holds cannot be read back.
				if err := os.RemoveAll(in.gitDir()); err != nil {
					return InitResult{}, err
				}
			}
		}
		req.KeepFiles = true
	}

	fi, err := os.Lstat(in.gitDir())
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return InitResult{}, err
	case fi.IsDir():
		done, err := in.run(ctx, nil, "config", "--bool", "--get", initMarker)
		if err == nil && done == "true" {
			if err := in.writeAlternates(req.Alternates); err != nil {
				return InitResult{}, err
			}
			if req.Rename {
				cur, err := in.run(ctx, nil, "symbolic-ref", "-q", "HEAD")
				if err == nil && cur != ref {
					if _, err := in.run(ctx, nil, "branch", "-m", "--", strings.TrimPrefix(ref, "refs/heads/")); err != nil {
						return InitResult{}, err
					}
				}
			}
			head, err := in.head(ctx)
			return InitResult{Head: head}, err
		}
		// An Init that did not complete: carry on.
	case req.KeepFiles:
		// A legacy worktree's .git file (or whatever stands there): its
		// admin directory is gone or not ours to read.
		if err := os.Remove(in.gitDir()); err != nil {
			return InitResult{}, err
		}
	default:
		return InitResult{}, fmt.Errorf("%w: %s is not a directory (a legacy worktree's .git file? use KeepFiles)", ErrExists, in.gitDir())
	}

	args := []string{"init", "-q"}
	if len(req.Base) == 64 {
		args = append(args, "--object-format=sha256")
	}
	args = append(args, "--", in.Dir)
	g, _ := in.runner()
	if _, err := g.run(ctx, gitCmd{dir: in.Dir, args: args}); err != nil {
		return InitResult{}, err
	}
	if err := in.writeAlternates(req.Alternates); err != nil {
		return InitResult{}, err
	}
	if _, err := in.run(ctx, nil, "cat-file", "-e", req.Base+"^{commit}"); err != nil {
		return InitResult{}, fmt.Errorf("%w: base commit %s is not readable through the alternates %q: %v", ErrNotFound, req.Base, req.Alternates, err)
	}
	if _, err := in.run(ctx, nil, "rev-parse", "-q", "--verify", ref); exitCode(err) == 1 {
		if _, err := in.run(ctx, nil, "update-ref", "-m", "patina: start workspace", ref, req.Base, ""); err != nil {
			return InitResult{}, err
		}
	} else if err != nil {
		return InitResult{}, err
	}
	if _, err := in.run(ctx, nil, "symbolic-ref", "HEAD", ref); err != nil {
		return InitResult{}, err
	}
	if req.Identity != nil {
		if _, err := in.run(ctx, nil, "config", "user.name", req.Identity.Name); err != nil {
			return InitResult{}, err
		}
		if _, err := in.run(ctx, nil, "config", "user.email", req.Identity.Email); err != nil {
			return InitResult{}, err
		}
	}
	mode := "--hard"
	if req.KeepFiles {
		mode = "--mixed"
	}
	if _, err := in.run(ctx, nil, "reset", "-q", mode); err != nil {
		return InitResult{}, err
	}
	if _, err := in.run(ctx, nil, "config", "--bool", initMarker, "true"); err != nil {
		return InitResult{}, err
	}
	head, err := in.head(ctx)
	return InitResult{Created: true, Head: head}, err
}

// writeAlternates replaces objects/info/alternates with alts.
func (in *Inside) writeAlternates(alts []string) error {
	dir := filepath.Join(in.gitDir(), "objects", "info")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	content := ""
	if len(alts) > 0 {
		content = strings.Join(alts, "\n") + "\n"
	}
	tmp, err := os.CreateTemp(dir, "alternates-")
	if err != nil {
		return err
	}
	if _, err := tmp.WriteString(content); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, "alternates"))
}
