package worktree

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Objects a workspace sends arrive as a pack stream from a Source. They are
// indexed into a quarantine, a private object directory under the user's
// objects directory (as git receive-pack does), and checked there with the
// user's objects visible as an alternate. Only then are the packs moved
// into the user's objects (a rename on the same file system), and only
// then does a ref move. Diff never moves them: its quarantine is removed.

// quarantinePrefix starts the name of every quarantine directory in
// <common>/objects; Open removes those left by a crash.
const quarantinePrefix = "patina-incoming-"

// quarantineLock is held (flock) by the process using a quarantine.
const quarantineLock = "patina.lock"

// staleQuarantineAge is how old an unlocked quarantine without a lock file
// must be before Open removes it: a new one is created, then locked, a
// moment later.
const staleQuarantineAge = time.Minute

// quarantine is one import in progress.
type quarantine struct {
	dir     string
	env     []string // for git commands that must see the quarantined objects
	release func()
}

// newQuarantine makes a quarantine directory and locks it.
func (r *Repo) newQuarantine() (*quarantine, error) {
	dir, err := os.MkdirTemp(r.objectsDir, quarantinePrefix)
	if err != nil {
		return nil, fmt.Errorf("quarantine: %w", err)
	}
	release, ok, err := tryFlock(filepath.Join(dir, quarantineLock))
	if err == nil && !ok {
		err = errors.New("locked by someone else")
	}
	if err == nil {
		err = os.Mkdir(filepath.Join(dir, "pack"), 0o755)
	}
	if err != nil {
		if release != nil {
			release()
		}
		os.RemoveAll(dir)
		return nil, fmt.Errorf("quarantine: %w", err)
	}
	return &quarantine{
		dir: dir,
		env: []string{
			"GIT_OBJECT_DIRECTORY=" + dir,
			"GIT_ALTERNATE_OBJECT_DIRECTORIES=" + r.objectsDir,
			// git refuses ref updates while this is set: nothing run in
			// the quarantine can move a ref by mistake.
			"GIT_QUARANTINE_PATH=" + dir,
		},
		release: release,
	}, nil
}

// remove deletes the quarantine and what is left in it. Nil-safe.
func (q *quarantine) remove() {
	if q == nil {
		return
	}
	os.RemoveAll(q.dir)
	q.release()
}

// envOf is q's environment, nil for no quarantine.
func (q *quarantine) envOf() []string {
	if q == nil {
		return nil
	}
	return q.env
}

// cleanQuarantines removes quarantines left behind by a crashed import:
// not locked by a live process, and either with a lock file (its creator
// got that far and is gone) or old enough.
func (r *Repo) cleanQuarantines() {
	ents, err := os.ReadDir(r.objectsDir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), quarantinePrefix) {
			continue
		}
		p := filepath.Join(r.objectsDir, e.Name())
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		if !fi.IsDir() {
			os.Remove(p)
			continue
		}
		lockPath := filepath.Join(p, quarantineLock)
		if _, err := os.Lstat(lockPath); err != nil && time.Since(fi.ModTime()) < staleQuarantineAge {
			continue
		}
		release, ok, err := tryFlock(lockPath)
		if err != nil || !ok {
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			r.logger.Warn("remove stale quarantine", "dir", p, "err", err)
		} else {
			r.logger.Info("removed stale quarantine", "dir", p)
		}
		release()
	}
}

// fetch makes sure every want is a commit whose objects are all present:
// in the repository already (nil quarantine), or in a new quarantine
// filled from src and checked. The caller removes the quarantine (and
// migrates it first if the objects are to stay).
func (r *Repo) fetch(ctx context.Context, src Source, wants, haves []string) (*quarantine, error) {
	complete, err := r.complete(ctx, nil, wants)
	if err != nil {
		return nil, err
	}
	if complete {
		return nil, r.checkCommits(ctx, nil, wants)
	}
	if src == nil {
		return nil, fmt.Errorf("%w: %s: not in the repository, and no source to fetch it from", ErrNotFound, strings.Join(wants, ", "))
	}
	q, err := r.newQuarantine()
	if err != nil {
		return nil, err
	}
	if err := r.receive(ctx, q, src, wants, haves); err != nil {
		q.remove()
		return nil, err
	}
	return q, nil
}

// complete reports whether every object reachable from wants is present
// (in the repository, or the quarantine env names) and reads: rev-list
// walks from wants down to what the repository's refs already reach.
// (Not --all: that reads every linked worktree's admin files, which a
// legacy workspace could make hang.)
func (r *Repo) complete(ctx context.Context, env []string, wants []string) (bool, error) {
	tips, err := r.refTips(ctx)
	if err != nil {
		return false, err
	}
	var in strings.Builder
	for _, w := range wants {
		in.WriteString(w + "\n")
	}
	for _, tip := range tips {
		in.WriteString("^" + tip + "\n")
	}
	c := r.cmd(env, "rev-list", "--objects", "--quiet", "--stdin")
	c.stdin = strings.NewReader(in.String())
	_, err = r.git.run(ctx, c)
	if err == nil {
		return true, nil
	}
	if ctx.Err() != nil {
		return false, err
	}
	var ge *GitError
	if errors.As(err, &ge) {
		return false, nil
	}
	return false, err
}

// refTips are the objects the repository's refs (and HEAD) point at.
func (r *Repo) refTips(ctx context.Context) ([]string, error) {
	c := r.cmd(nil, "for-each-ref", "--format=%(objectname)")
	c.limit = 1 << 30
	out, err := r.git.run(ctx, c)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var tips []string
	for _, oid := range strings.Fields(string(out)) {
		if r.format.isOID(oid) && !seen[oid] {
			seen[oid] = true
			tips = append(tips, oid)
		}
	}
	if head, err := r.revParse(ctx, nil, "HEAD"); err == nil && !seen[head] {
		tips = append(tips, head)
	}
	return tips, nil
}

// receive reads a pack of wants (not haves) from src into q and checks it:
// within the size limits (the pack scanner, as it flows to git), a valid
// pack, every object passing git's fsck checks, every want a commit and
// everything it reaches present.
func (r *Repo) receive(ctx context.Context, q *quarantine, src Source, wants, haves []string) error {
	rc, err := callPack(ctx, src, slices.Clone(wants), slices.Clone(haves))
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("waiting for the workspace's pack: %w", ctx.Err())
		}
		return fmt.Errorf("%w: the workspace could not send its objects: %w", ErrRejected, err)
	}
	defer rc.Close()
	// Close the stream when ctx ends, so that a Read blocked on a silent
	// workspace returns.
	stop := context.AfterFunc(ctx, func() { rc.Close() })
	defer stop()

	// The scanner reads the stream and hands index-pack only what it has
	// checked (see packscan.go); a pack it refuses stops index-pack.
	in := &errReader{r: rc}
	pr, pw := io.Pipe()
	scanned := make(chan error, 1)
	go func() {
		_, err := scanPack(pw, in, r.packLimits())
		pw.CloseWithError(err)
		scanned <- err
	}()
	// index-pack --strict runs git's fsck checks on every object (.git
	// entries in trees, bad .gitmodules, malformed objects...) with git's
	// built-in severities: it reads no fsck.* configuration (no skipList).
	// --fix-thin completes deltas against the user's objects.
	idx, err := r.git.run(ctx, gitCmd{
		dir:   r.root,
		args:  []string{"index-pack", "--strict", "--fix-thin", "--stdin", "--max-input-size=" + strconv.FormatInt(r.cfg.MaxPackBytes, 10)},
		env:   append(r.repoEnv(), q.env...),
		stdin: pr,
		limit: 4096,
	})
	// Unblock the scanner, whether it waits on git or on the workspace.
	pr.Close()
	rc.Close()
	scanErr := <-scanned
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("receiving the workspace's pack: %w", ctx.Err())
	case errors.Is(scanErr, ErrTooLarge), errors.Is(scanErr, ErrRejected):
		return scanErr
	case err == nil && scanErr != nil:
		// Cannot be: git took a pack the scanner did not finish.
		return fmt.Errorf("%w: reading the workspace's pack: %w", ErrRejected, scanErr)
	case err == nil:
	case in.err != nil && errors.Is(err, in.err):
		// The stream failed (and git was stopped for it); an error the
		// closing above caused is not this.
		return fmt.Errorf("%w: reading the workspace's pack: %w", ErrRejected, in.err)
	case errors.Is(err, ErrTooLarge):
		return err
	default:
		return fmt.Errorf("%w: %w", ErrRejected, err)
	}
	if _, err := parseIndexPackOutput(string(idx)); err != nil {
		return fmt.Errorf("%w: %v", ErrRejected, err)
	}
	if err := r.checkCommits(ctx, q.env, wants); err != nil {
		return err
	}
	complete, err := r.complete(ctx, q.env, wants)
	if err != nil {
		return err
	}
	if !complete {
		return fmt.Errorf("%w: objects reachable from %s are missing from the workspace's pack", ErrRejected, strings.Join(wants, ", "))
	}
	return nil
}

// packLimits are the scanner's limits for a workspace's pack.
func (r *Repo) packLimits() packLimits {
	return packLimits{
		packBytes:   r.cfg.MaxPackBytes,
		objectBytes: r.cfg.MaxSingleObjectBytes,
		totalBytes:  r.cfg.MaxObjectBytes,
		hashLen:     r.format.hexLen / 2,
	}
}

// callPack calls src.Pack, giving up when ctx is done even if Pack does not
// return (its stream is closed whenever it does).
func callPack(ctx context.Context, src Source, want, have []string) (io.ReadCloser, error) {
	type result struct {
		rc  io.ReadCloser
		err error
	}
	ch := make(chan result, 1)
	go func() {
		rc, err := src.Pack(ctx, want, have)
		ch <- result{rc, err}
	}()
	select {
	case res := <-ch:
		if res.err != nil && res.rc != nil {
			res.rc.Close()
		}
		if res.err == nil && res.rc == nil {
			return nil, errors.New("source returned no stream")
		}
		return res.rc, res.err
	case <-ctx.Done():
		go func() {
			if res := <-ch; res.rc != nil {
				res.rc.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

// checkCommits fails with ErrRejected unless every oid is a commit.
func (r *Repo) checkCommits(ctx context.Context, env []string, oids []string) error {
	types, err := r.objectTypes(ctx, env, oids)
	if err != nil {
		return err
	}
	for _, oid := range oids {
		switch t := types[oid]; t {
		case "commit":
		case "":
			return fmt.Errorf("%w: %s is missing", ErrRejected, oid)
		default:
			return fmt.Errorf("%w: %s is a %s, not a commit", ErrRejected, oid, t)
		}
	}
	return nil
}

// objectTypes maps each oid to its type; missing ones are left out.
func (r *Repo) objectTypes(ctx context.Context, env []string, oids []string) (map[string]string, error) {
	c := r.cmd(env, "cat-file", "--batch-check=%(objectname) %(objecttype)")
	c.stdin = strings.NewReader(strings.Join(oids, "\n") + "\n")
	out, err := r.git.run(ctx, c)
	if err != nil {
		return nil, err
	}
	return parseBatchCheck(string(out)), nil
}

// packName matches what index-pack writes: pack-<hash>.<ext>.
var packName = regexp.MustCompile(`^pack-[0-9a-f]{40,64}\.(pack|rev|idx)$`)

// migrate moves q's packs into the repository's objects: each .pack before
// its .rev and .idx (git finds packs by their .idx). Empty packs are
// dropped. Callers hold the repository lock.
func (r *Repo) migrate(q *quarantine) error {
	if q == nil {
		return nil
	}
	src := filepath.Join(q.dir, "pack")
	dst := filepath.Join(r.objectsDir, "pack")
	ents, err := os.ReadDir(src)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, e := range ents {
		name := e.Name()
		if !packName.MatchString(name) || !strings.HasSuffix(name, ".pack") {
			continue
		}
		n, err := packObjects(filepath.Join(src, name))
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		if n == 0 {
			continue
		}
		base := strings.TrimSuffix(name, ".pack")
		for _, ext := range []string{".pack", ".rev", ".idx"} {
			from := filepath.Join(src, base+ext)
			if _, err := os.Lstat(from); errors.Is(err, fs.ErrNotExist) && ext == ".rev" {
				continue
			}
			if err := moveFile(from, filepath.Join(dst, base+ext)); err != nil {
				return fmt.Errorf("migrate: %w", err)
			}
		}
		r.logger.Debug("pack migrated", "pack", base, "objects", n)
	}
	return nil
}

// moveFile moves from to to. A pack file's name is the hash of its
// content, so an existing to is the same file and stays.
func moveFile(from, to string) error {
	err := os.Link(from, to)
	if err == nil || errors.Is(err, fs.ErrExist) {
		return nil
	}
	if _, err := os.Lstat(to); err == nil {
		return nil
	}
	return os.Rename(from, to)
}

// packObjects reads the object count from a pack's header.
func packObjects(path string) (uint32, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var h [12]byte
	if _, err := io.ReadFull(f, h[:]); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return parsePackHeader(h[:])
}

// parsePackHeader parses "PACK", version 2 or 3, object count.
func parsePackHeader(h []byte) (uint32, error) {
	if len(h) < 12 || !bytes.Equal(h[:4], []byte("PACK")) {
		return 0, errors.New("not a pack")
	}
	if v := binary.BigEndian.Uint32(h[4:8]); v != 2 && v != 3 {
		return 0, fmt.Errorf("pack version %d", v)
	}
	return binary.BigEndian.Uint32(h[8:12]), nil
}

// haves are the commits a workspace's pack need not include: the branch
// tip as recorded, the base commit and the base ref's tip, when they are
// object ids of this repository.
func (r *Repo) haves(ctx context.Context, ws Workspace) []string {
	var haves []string
	add := func(oid string) {
		if r.format.isOID(oid) && !slices.Contains(haves, oid) {
			haves = append(haves, oid)
		}
	}
	add(ws.Head)
	add(ws.BaseCommit)
	if ws.BaseRef != "" {
		if tip, err := r.revParse(ctx, nil, ws.BaseRef+"^{commit}"); err == nil {
			add(tip)
		}
	}
	return haves
}
