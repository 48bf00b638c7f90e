package worktree

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRecord(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ctx := testCtx(t)
	ws := mustCreate(t, r, CreateRequest{Name: "rec"})
	in := newInside(t, ws)

	// Work committed with plain git inside, as an agent would.
	writeFile(t, filepath.Join(in.Dir, "agent.txt"), "agent\n")
	gitT(t, in.Dir, "add", "agent.txt")
	gitT(t, in.Dir, "commit", "-q", "-m", "agent's own commit")
	head := gitT(t, in.Dir, "rev-parse", "HEAD")
	if _, err := gitTry(repo, "cat-file", "-e", head); err == nil {
		t.Fatalf("exp the commit only in the workspace before Record")
	}

	res, err := r.Record(ctx, "rec", RecordRequest{Head: head, Source: insideSource{in}})
	if err != nil {
		t.Fatal(err)
	}
	if exp := (RecordResult{Previous: ws.BaseCommit, Head: head, Moved: true}); res != exp {
		t.Fatalf("exp %+v, got %+v", exp, res)
	}
	if exp, got := head, gitT(t, repo, "rev-parse", "refs/heads/patina/rec"); exp != got {
		t.Fatalf("exp branch at %s, got %s", exp, got)
	}
	if _, err := gitTry(repo, "fsck", "--full", "--strict", "--no-dangling"); err != nil {
		t.Fatalf("fsck: %v", err)
	}
	if exp, got := head, mustGet(t, r, "rec").Head; exp != got {
		t.Fatalf("exp Head %s, got %s", exp, got)
	}
	if left, _ := filepath.Glob(filepath.Join(repo, ".git", "objects", quarantinePrefix+"*")); len(left) != 0 {
		t.Fatalf("exp no quarantine left, got %v", left)
	}

	// Recording again: nothing to fetch, nothing moves.
	res, err = r.Record(ctx, "rec", RecordRequest{Head: head})
	if err != nil || res.Moved {
		t.Fatalf("exp a no-op, got %+v, %v", res, err)
	}
	// Back to the base: objects present, no source needed.
	if res, err := r.Record(ctx, "rec", RecordRequest{Head: ws.BaseCommit}); err != nil || !res.Moved {
		t.Fatalf("exp a move back to the base, got %+v, %v", res, err)
	}
	evs, _ := r.Log(ctx, "rec")
	if last := evs[len(evs)-1]; last.Kind != EventRecorded || !strings.Contains(last.Message, ws.BaseCommit) {
		t.Fatalf("exp a recorded event, got %+v", last)
	}
	// Without a source, objects the repository lacks cannot come.
	writeFile(t, filepath.Join(in.Dir, "more.txt"), "more\n")
	c, _ := in.Commit(ctx, CommitRequest{})
	_, err = r.Record(ctx, "rec", RecordRequest{Head: c.Commit})
	wantErr(t, err, ErrNotFound)
}

// A branch deleted behind patina's back is re-created by Record.
func TestRecordRecreatesDeletedBranch(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ws := mustCreate(t, r, CreateRequest{Name: "gone"})
	in := newInside(t, ws)
	gitT(t, repo, "branch", "-D", "patina/gone")
	tip := agentCommit(t, r, ws, in, map[string]string{"a.txt": "a\n"})
	if exp, got := tip, gitT(t, repo, "rev-parse", "refs/heads/patina/gone"); exp != got {
		t.Fatalf("exp branch at %s, got %s", exp, got)
	}
}

// bytesSource sends fixed bytes, whatever is asked.
type bytesSource []byte

func (b bytesSource) Pack(context.Context, []string, []string) (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(b)), nil
}

// errSource fails.
type errSource struct{}

func (errSource) Pack(context.Context, []string, []string) (io.ReadCloser, error) {
	return nil, errors.New("agent unreachable")
}

// stuckSource never returns from Pack, whatever the context says.
type stuckSource struct{ release chan struct{} }

func (s stuckSource) Pack(context.Context, []string, []string) (io.ReadCloser, error) {
	<-s.release
	return nil, errors.New("released")
}

// silentSource returns a stream that never sends a byte: Read blocks until
// Close.
type silentSource struct{}

func (silentSource) Pack(context.Context, []string, []string) (io.ReadCloser, error) {
	pr, _ := io.Pipe()
	return pr, nil
}

// rawPack packs exactly the given objects of the repository at dir (no
// walk), as a hostile workspace can.
func rawPack(t *testing.T, dir string, oids ...string) []byte {
	t.Helper()
	out, err := gitRawIn(dir, nil, strings.Join(oids, "\n")+"\n", "pack-objects", "--stdout", "-q")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// packOf is Inside.Pack's stream for want, excluding have.
func packOf(t *testing.T, in *Inside, want string, have ...string) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := in.Pack(testCtx(t), []string{want}, have, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// hashIn writes an object in the repository at dir.
func hashIn(t *testing.T, dir, typ, content string) string {
	t.Helper()
	out, err := gitTryIn(dir, content, "hash-object", "-w", "--literally", "-t", typ, "--stdin")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// commitIn makes a commit of tree on parent in the repository at dir.
func commitIn(t *testing.T, dir, tree, parent, msg string) string {
	t.Helper()
	return gitT(t, dir, "commit-tree", tree, "-p", parent, "-m", msg)
}

// Whatever a workspace sends, Record either takes a checked commit or
// refuses with a clear error, leaving the user's refs, objects, config and
// hooks exactly as they were; nothing hangs.
func TestRecordRefusesHostileSources(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	// The user relaxed fsck for their own use: patina's checks of what a
	// workspace sends must not be.
	gitT(t, repo, "config", "fsck.hasDotgit", "ignore")
	gitT(t, repo, "config", "fsck.gitmodulesUrl", "ignore")
	gitT(t, repo, "config", "receive.fsck.hasDotgit", "ignore")
	gitT(t, repo, "config", "transfer.fsckObjects", "false")
	r, err := Open(testCtx(t), Config{StateDir: t.TempDir(), Logger: testLogger(t), MaxPackBytes: 256 << 10, MaxObjectBytes: 8 << 20}, repo)
	if err != nil {
		t.Fatal(err)
	}
	ws := mustCreate(t, r, CreateRequest{Name: "hostile"})
	in := newInside(t, ws)
	dir := in.Dir
	base := ws.BaseCommit

	good := agentCommit(t, r, ws, in, map[string]string{"ok.txt": "fine\n"})
	ws = mustGet(t, r, "hostile")

	// A tree with a .git entry.
	evil := hashIn(t, dir, "blob", "[core]\n\tfsmonitor = touch /tmp/pwned\n")
	dotgitTree := mktreeIn(t, dir, mktreeEntry("040000", mktreeIn(t, dir, mktreeEntry("100644", evil, "config")), ".git"))
	dotgit := commitIn(t, dir, dotgitTree, good, "a .git directory")
	// A .gitmodules whose url is an option.
	gm := hashIn(t, dir, "blob", "[submodule \"x\"]\n\tpath = x\n\turl = --upload-pack=touch${IFS}/tmp/pwned\n")
	gmTree := mktreeIn(t, dir, mktreeEntry("100644", gm, ".gitmodules"))
	badModules := commitIn(t, dir, gmTree, good, "bad .gitmodules")
	// A commit whose tree names a blob nobody has.
	ghost := hashIn(t, dir, "blob", "never sent\n")
	ghostTree := mktreeIn(t, dir, mktreeEntry("100644", ghost, "ghost"))
	missing := commitIn(t, dir, ghostTree, good, "missing blob")
	// A blob, a tree and a tag where a commit belongs.
	blob := hashIn(t, dir, "blob", "just a blob\n")
	tree := gitT(t, dir, "rev-parse", good+"^{tree}")
	tag := hashIn(t, dir, "tag", fmt.Sprintf("object %s\ntype commit\ntag v\ntagger A <a@b> 0 +0000\n\nmsg\n", good))
	// Big: incompressible for the pack limit, compressible for the
	// inflated limit.
	noise := make([]byte, 512<<10)
	rand.Read(noise)
	writeFile(t, filepath.Join(dir, "noise.bin"), string(noise))
	gitT(t, dir, "add", "noise.bin")
	gitT(t, dir, "commit", "-q", "-m", "noise")
	bigPack := gitT(t, dir, "rev-parse", "HEAD")
	gitT(t, dir, "reset", "-q", "--hard", good)
	writeFile(t, filepath.Join(dir, "zeros.bin"), strings.Repeat("\x00", 16<<20))
	gitT(t, dir, "add", "zeros.bin")
	gitT(t, dir, "commit", "-q", "-m", "zeros")
	bomb := gitT(t, dir, "rev-parse", "HEAD")
	gitT(t, dir, "reset", "-q", "--hard", good)
	goodPack := packOf(t, in, good, base)

	release := make(chan struct{})
	t.Cleanup(func() { close(release) })

	tests := []struct {
		name string
		head string
		src  Source
		exp  error
		ctx  time.Duration // a short deadline for sources that hang
	}{
		{"garbage", dotgit, bytesSource("this is not a pack\n"), ErrRejected, 0},
		{"empty-stream", dotgit, bytesSource(nil), ErrRejected, 0},
		{"truncated", dotgit, bytesSource(packOf(t, in, dotgit, good)[:40]), ErrRejected, 0},
		{"dotgit-tree", dotgit, insideSource{in}, ErrRejected, 0},
		{"bad-gitmodules", badModules, insideSource{in}, ErrRejected, 0},
		{"missing-blob", missing, bytesSource(rawPack(t, dir, missing, ghostTree)), ErrRejected, 0},
		{"other-objects", missing, bytesSource(goodPack), ErrRejected, 0},
		{"blob-head", blob, bytesSource(rawPack(t, dir, blob)), ErrRejected, 0},
		{"tree-head", tree, bytesSource(rawPack(t, dir, tree)), ErrRejected, 0},
		{"tag-head", tag, bytesSource(rawPack(t, dir, tag)), ErrRejected, 0},
		{"user-blob-head", gitT(t, repo, "rev-parse", "HEAD:README.md"), nil, ErrRejected, 0},
		{"oversized", bigPack, insideSource{in}, ErrTooLarge, 0},
		{"inflates", bomb, insideSource{in}, ErrTooLarge, 0},
		{"source-error", dotgit, errSource{}, ErrRejected, 0},
		{"stuck-source", dotgit, stuckSource{release}, context.DeadlineExceeded, time.Second},
		{"silent-source", dotgit, silentSource{}, context.DeadlineExceeded, time.Second},
		{"not-hex", "HEAD", insideSource{in}, ErrInvalidName, 0},
		{"short-hex", good[:12], insideSource{in}, ErrInvalidName, 0},
	}
	before := snapshotRepo(t, repo)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			if tc.ctx > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.ctx)
				defer cancel()
			}
			start := time.Now()
			_, err := r.Record(ctx, "hostile", RecordRequest{Head: tc.head, Source: tc.src})
			wantErr(t, err, tc.exp)
			if tc.ctx > 0 && time.Since(start) > tc.ctx+10*time.Second {
				t.Fatalf("exp Record to give up soon after the deadline, took %v", time.Since(start))
			}
			t.Logf("refused: %v", err)
			wantSameRepo(t, before, snapshotRepo(t, repo))
			if exp, got := good, mustGet(t, r, "hostile").Head; exp != got {
				t.Fatalf("exp the branch still at %s, got %s", exp, got)
			}
		})
	}
	if _, err := os.Stat("/tmp/pwned"); err == nil {
		t.Fatalf("something ran the workspace's command")
	}
	// And the workspace still records good work afterwards.
	next := agentCommit(t, r, ws, in, map[string]string{"next.txt": "next\n"})
	if exp, got := next, mustGet(t, r, "hostile").Head; exp != got {
		t.Fatalf("exp %s recorded, got %s", exp, got)
	}
}

// mktreeIn writes a tree of entries (mktreeEntry lines), whatever their
// names, in the repository at dir.
func mktreeIn(t *testing.T, dir string, entries ...string) string {
	t.Helper()
	out, err := gitTryIn(dir, strings.Join(entries, ""), "mktree", "--missing")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// mktreeEntry is one line of git mktree input.
func mktreeEntry(mode, oid, name string) string {
	typ := "blob"
	if mode == "040000" {
		typ = "tree"
	}
	return fmt.Sprintf("%s %s %s\t%s\n", mode, typ, oid, name)
}

// A quarantine left by a crash is removed when the repository is opened
// again; one in use (locked) is not.
func TestStaleQuarantineRemovedAtOpen(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	stale, err := r.newQuarantine()
	if err != nil {
		t.Fatal(err)
	}
	stale.release() // the process died
	live, err := r.newQuarantine()
	if err != nil {
		t.Fatal(err)
	}
	defer live.remove()
	// One that died before it locked: removed once old enough.
	young, err := os.MkdirTemp(r.objectsDir, quarantinePrefix)
	if err != nil {
		t.Fatal(err)
	}
	oldDir, err := os.MkdirTemp(r.objectsDir, quarantinePrefix)
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	for _, d := range []string{live.dir, oldDir} {
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
	}
	openRepo(t, repo)
	for _, d := range []string{stale.dir, oldDir} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Fatalf("exp the stale quarantine %s removed, got %v", d, err)
		}
	}
	for _, d := range []string{live.dir, young} {
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("exp %s kept, got %v", d, err)
		}
	}
}
