package daggerws

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/patina-dev/patina/sidecar/client"
)

// Default limits of Fetch.
const (
	DefaultMaxFiles = 100_000
	DefaultMaxBytes = 1 << 30 // 1 GiB
	// fetchWorkers is how many files Fetch reads from the sidecar at once.
	fetchWorkers = 8
)

// FilesAPI is the part of the sidecar's client Fetch calls; *client.Client
// implements it.
type FilesAPI interface {
	Addr() string
	ListDir(ctx context.Context, ws, path string) ([]client.FileInfo, error)
	ReadFile(ctx context.Context, ws, path string) ([]byte, error)
}

var _ FilesAPI = (*client.Client)(nil)

// ErrLimit: the workspace holds more files, or more bytes, than Fetch was
// allowed to copy (the message says which limit and how to raise it).
var ErrLimit = errors.New("workspace too large to fetch")

// FetchRequest is what Fetch needs.
type FetchRequest struct {
	// Workspace is the workspace's name or id.
	Workspace string
	// Dest is the local directory the files are written into. It is
	// created when missing and must be empty.
	Dest string
	// MaxFiles caps the number of files copied; 0 means DefaultMaxFiles.
	MaxFiles int
	// MaxBytes caps the total size of the files copied; 0 means
	// DefaultMaxBytes.
	MaxBytes int64
}

// Validate checks a request without calling the sidecar.
func (r FetchRequest) Validate() error {
	if r.Workspace == "" {
		return ErrNoWorkspace
	}
	if r.Dest == "" {
		return invalidf("no destination directory")
	}
	if r.MaxFiles < 0 {
		return invalidf("max files %d: want 0 (the default, %d) or more", r.MaxFiles, DefaultMaxFiles)
	}
	if r.MaxBytes < 0 {
		return invalidf("max bytes %d: want 0 (the default, %d) or more", r.MaxBytes, int64(DefaultMaxBytes))
	}
	return nil
}

func (r FetchRequest) limits() (files int, bytes int64) {
	files, bytes = r.MaxFiles, r.MaxBytes
	if files == 0 {
		files = DefaultMaxFiles
	}
	if bytes == 0 {
		bytes = DefaultMaxBytes
	}
	return files, bytes
}

// Skipped is an entry of the workspace that Fetch did not copy.
type Skipped struct {
	// Path is relative to the workspace's root (/workspace), with slashes.
	Path   string
	Reason string
}

// FetchResult says what Fetch copied.
type FetchResult struct {
	Files int
	Dirs  int
	Bytes int64
	// Skipped lists what was left out, in the order met.
	Skipped []Skipped
}

// Summary is a few lines for a log: the counts, then each skipped entry.
func (r FetchResult) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "fetched %d files (%d bytes) in %d directories", r.Files, r.Bytes, r.Dirs)
	if len(r.Skipped) > 0 {
		fmt.Fprintf(&b, "; skipped %d:", len(r.Skipped))
		for _, s := range r.Skipped {
			fmt.Fprintf(&b, "\n  %s: %s", s.Path, s.Reason)
		}
	}
	return b.String()
}

// Fetch copies the files of a workspace (its /workspace directory) into
// the local directory req.Dest, through the sidecar's files API: it lists
// each directory and reads each file. What it copies:
//
//   - directories and regular files, with their permission bits (the owner
//     may always read and write them, so the copy can be written and read);
//   - a symbolic link that the sidecar resolves to a regular file inside
//     the workspace, as a regular file holding that file's bytes: the
//     listing does not give a link's target, so the link itself cannot be
//     recreated; a link can never bring in anything from outside the
//     workspace (the sidecar refuses to follow it there).
//
// What it leaves out, listing each in the result: the worktree's .git file
// at the root (it names a git directory on the sidecar's machine, which
// would make git in the copy fail), symbolic links to directories (a copy
// could repeat a tree or loop), links that dangle or leave the workspace,
// other file types (fifos, sockets, devices), entries whose names could
// not be a file name, and files removed while Fetch ran.
//
// It fails, with ErrLimit, before reading past req's file-count or byte
// limit. On any failure req.Dest may hold part of the workspace.
func Fetch(ctx context.Context, c FilesAPI, req FetchRequest) (FetchResult, error) {
	if err := req.Validate(); err != nil {
		return FetchResult{}, err
	}
	if err := os.MkdirAll(req.Dest, 0o755); err != nil {
		return FetchResult{}, fmt.Errorf("fetch workspace %q: %w", req.Workspace, err)
	}
	dest, err := os.OpenRoot(req.Dest)
	if err != nil {
		return FetchResult{}, fmt.Errorf("fetch workspace %q: %w", req.Workspace, err)
	}
	defer dest.Close()
	if ents, err := fs.ReadDir(dest.FS(), "."); err != nil || len(ents) > 0 {
		if err == nil {
			err = fmt.Errorf("%s is not empty", req.Dest)
		}
		return FetchResult{}, fmt.Errorf("fetch workspace %q: %w", req.Workspace, err)
	}
	maxFiles, maxBytes := req.limits()
	f := &fetcher{c: c, ws: req.Workspace, dest: dest, maxFiles: maxFiles, maxBytes: maxBytes}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	err = f.run(ctx, cancel)
	slices.SortFunc(f.res.Skipped, func(a, b Skipped) int { return strings.Compare(a.Path, b.Path) })
	if err != nil {
		return f.res, explain(c, fmt.Sprintf("fetch the files of workspace %q", req.Workspace), req.Workspace, err)
	}
	return f.res, nil
}

// fetcher walks the workspace's directories in one goroutine and reads
// files in fetchWorkers others.
type fetcher struct {
	c        FilesAPI
	ws       string
	dest     *os.Root
	maxFiles int
	maxBytes int64

	mu  sync.Mutex
	res FetchResult
	// reserved counts files and bytes promised to the workers from the
	// listings' sizes, so that limits fail before anything is read.
	reservedFiles int
	reservedBytes int64
}

// job is one file to read: its path relative to the workspace, and the
// permission bits to give it.
type job struct {
	rel  string
	perm fs.FileMode
	size int64
	// link says the entry is a symbolic link (resolved by the sidecar).
	link bool
}

// dirMode is a directory to chmod once its contents are written.
type dirMode struct {
	rel  string
	perm fs.FileMode
}

func (f *fetcher) run(ctx context.Context, cancel context.CancelCauseFunc) error {
	jobs := make(chan job)
	var wg sync.WaitGroup
	for range fetchWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if err := f.file(ctx, j); err != nil {
					cancel(err)
				}
			}
		}()
	}
	dirs, walkErr := f.walk(ctx, jobs)
	close(jobs)
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	if walkErr != nil {
		return walkErr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// Deepest first, so that a directory without write permission is
	// closed after its subdirectories.
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := f.dest.Chmod(dirs[i].rel, dirs[i].perm); err != nil {
			return err
		}
	}
	return nil
}

// walk lists the workspace's directories breadth first, creates them
// under dest and sends each file to jobs. It returns the directories it
// created, parents before children.
func (f *fetcher) walk(ctx context.Context, jobs chan<- job) ([]dirMode, error) {
	var dirs []dirMode
	queue := []string{"."}
	for len(queue) > 0 {
		dir := queue[0]
		queue = queue[1:]
		ents, err := f.c.ListDir(ctx, f.ws, apiPath(dir))
		if err != nil {
			if dir != "." && isNotFound(err) {
				f.skip(dir, "removed while fetching")
				continue
			}
			return dirs, fmt.Errorf("list %s: %w", displayPath(dir), err)
		}
		for _, e := range ents {
			rel := path.Join(dir, e.Name)
			if !validName(e.Name) {
				f.skip(path.Join(dir, strings.ToValidUTF8(e.Name, "?")), "not a usable file name")
				continue
			}
			perm := permOf(e.Mode)
			switch e.Type {
			case "dir":
				if dir == "." && e.Name == ".git" {
					f.skip(rel, "the workspace's own git directory (it borrows objects through a path only its container has)")
					continue
				}
				if err := f.dest.Mkdir(rel, 0o700); err != nil {
					return dirs, err
				}
				dirs = append(dirs, dirMode{rel: rel, perm: perm | 0o700})
				f.count(func(r *FetchResult) { r.Dirs++ })
				queue = append(queue, rel)
			case "file":
				if dir == "." && e.Name == ".git" {
					f.skip(rel, "a git link file (its git directory is not in the workspace)")
					continue
				}
				if err := f.reserve(rel, e.Size); err != nil {
					return dirs, err
				}
				if !send(ctx, jobs, job{rel: rel, perm: perm | 0o600, size: e.Size}) {
					return dirs, ctx.Err()
				}
			case "symlink":
				// The listing gives the link's own size (its target's
				// length); the file's is checked once read.
				if err := f.reserve(rel, 0); err != nil {
					return dirs, err
				}
				if !send(ctx, jobs, job{rel: rel, perm: 0o644, link: true}) {
					return dirs, ctx.Err()
				}
			default:
				f.skip(rel, "not a regular file, directory or symbolic link")
			}
		}
	}
	return dirs, nil
}

func send(ctx context.Context, jobs chan<- job, j job) bool {
	select {
	case jobs <- j:
		return true
	case <-ctx.Done():
		return false
	}
}

// reserve counts a file the walk is about to hand out, failing when it
// would go past a limit.
func (f *fetcher) reserve(rel string, size int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.reservedFiles+1 > f.maxFiles {
		return fmt.Errorf("%w: more than %d files (at %s); raise --max-files, or fetch less", ErrLimit, f.maxFiles, rel)
	}
	if f.reservedBytes+size > f.maxBytes {
		return fmt.Errorf("%w: more than %d bytes (at %s, %d bytes); raise --max-bytes, or fetch less", ErrLimit, f.maxBytes, rel, size)
	}
	f.reservedFiles++
	f.reservedBytes += size
	return nil
}

// file reads one file (or link) from the sidecar and writes it under dest.
func (f *fetcher) file(ctx context.Context, j job) error {
	data, err := f.c.ReadFile(ctx, f.ws, apiPath(j.rel))
	if err != nil {
		if reason := linkSkipReason(err); j.link && reason != "" {
			f.unreserve(j.size)
			f.skip(j.rel, "symbolic link: "+reason)
			return nil
		}
		if isNotFound(err) {
			f.unreserve(j.size)
			f.skip(j.rel, "removed while fetching")
			return nil
		}
		return fmt.Errorf("read %s: %w", j.rel, err)
	}
	// The file may have grown since it was listed (or is a link).
	if extra := int64(len(data)) - j.size; extra > 0 {
		f.mu.Lock()
		over := f.reservedBytes+extra > f.maxBytes
		if !over {
			f.reservedBytes += extra
		}
		f.mu.Unlock()
		if over {
			return fmt.Errorf("%w: more than %d bytes (at %s, %d bytes); raise --max-bytes, or fetch less", ErrLimit, f.maxBytes, j.rel, len(data))
		}
	}
	if err := f.dest.WriteFile(j.rel, data, 0o600); err != nil {
		return err
	}
	if err := f.dest.Chmod(j.rel, j.perm); err != nil {
		return err
	}
	f.count(func(r *FetchResult) { r.Files++; r.Bytes += int64(len(data)) })
	return nil
}

func (f *fetcher) unreserve(size int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reservedFiles--
	f.reservedBytes -= size
}

func (f *fetcher) skip(rel, reason string) {
	f.count(func(r *FetchResult) { r.Skipped = append(r.Skipped, Skipped{Path: rel, Reason: reason}) })
}

func (f *fetcher) count(update func(*FetchResult)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	update(&f.res)
}

// linkSkipReason says why a symbolic link that the sidecar would not
// serve as a file is left out ("" when err is no answer of the sidecar's,
// e.g. a broken connection, which fails the fetch).
func linkSkipReason(err error) string {
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) {
		return ""
	}
	switch apiErr.Code {
	case client.CodeNotFound:
		return "its target does not exist"
	case client.CodeInvalid:
		// The sidecar answers 400 for a link leading out of the
		// workspace, and the client for one to a directory.
		return "it points to a directory or out of the workspace"
	}
	return "the sidecar would not read it: " + oneLine(apiErr.Message, 200)
}

func isNotFound(err error) bool {
	var apiErr *client.APIError
	return errors.As(err, &apiErr) && apiErr.Code == client.CodeNotFound
}

// validName reports whether a listing's name is one element of a path.
func validName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00")
}

// permOf reads the permission bits of Go's FileMode.String() form
// ("-rwxr-xr-x", "drwxr-x---", "urwsr-xr-x"): its last nine characters.
// A malformed mode gives 0, which the callers widen to owner access.
func permOf(mode string) fs.FileMode {
	if len(mode) < 9 {
		return 0
	}
	var perm fs.FileMode
	for i, c := range mode[len(mode)-9:] {
		if c != '-' {
			perm |= 1 << (8 - i)
		}
	}
	return perm
}

// apiPath is a walk path as the files API takes it ("" for the root).
func apiPath(rel string) string {
	if rel == "." {
		return ""
	}
	return rel
}

func displayPath(rel string) string {
	if rel == "." {
		return "/workspace"
	}
	return rel
}
