package workspace

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/patina-dev/patina/internal/syncbuf"
)

// gitOut runs git in dir and returns its trimmed output.
func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
	cmd.Dir = dir
	o, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return strings.TrimSpace(string(o))
}

// userCommit commits a file in the user's repository on its current
// branch and returns the commit.
func userCommit(t *testing.T, repo, name, content string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(repo, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	gitOut(t, repo, "add", name)
	gitOut(t, repo, "commit", "-q", "-m", name)
	return gitOut(t, repo, "rev-parse", "HEAD")
}

// recordOf is a workspace's record as the Manager holds it.
func recordOf(t *testing.T, m *Manager, name string) meta {
	t.Helper()
	w, err := m.lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.meta
}

// storeObjects lists the objects of the stores' object directories.
func storeObjects(t *testing.T, objs []string) []string {
	t.Helper()
	var ids []string
	for _, o := range objs {
		bare := filepath.Join(t.TempDir(), "r.git")
		gitOut(t, t.TempDir(), "init", "-q", "--bare", bare)
		cmd := exec.Command("git", "cat-file", "--batch-all-objects", "--batch-check=%(objectname)")
		cmd.Dir = bare
		cmd.Env = append(os.Environ(), "GIT_DIR="+bare, "GIT_OBJECT_DIRECTORY="+o)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("list %s: %v", o, err)
		}
		ids = append(ids, strings.Fields(string(out))...)
	}
	sort.Strings(ids)
	return ids
}

// storeDirs lists the stores under the state directory (names).
func storeDirs(t *testing.T, stateDir string) []string {
	t.Helper()
	var names []string
	repos, _ := os.ReadDir(filepath.Join(stateDir, objectsDir))
	for _, r := range repos {
		ents, _ := os.ReadDir(filepath.Join(stateDir, objectsDir, r.Name()))
		for _, e := range ents {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names
}

// TestObjectStores: workspaces of one base share one store holding exactly
// what the base reaches (not another branch, not the notes); a workspace of
// a later base gets a store extending it; a store goes when the last
// workspace that borrows from it does.
func TestObjectStores(t *testing.T) {
	eng := newFakeEngine(t)
	state := t.TempDir()
	m := newManager(t, eng, state)
	ctx := context.Background()
	repo := gitRepo(t)
	userCommit(t, repo, "a.txt", "a\n")
	gitOut(t, repo, "checkout", "-q", "-b", "other")
	userCommit(t, repo, "secret.env", "TOKEN=other-branch\n")
	secret := gitOut(t, repo, "rev-parse", "other:secret.env")
	gitOut(t, repo, "checkout", "-q", "main")
	base := gitOut(t, repo, "rev-parse", "main")

	for _, n := range []string{"one", "two"} {
		if _, err := m.Create(ctx, CreateRequest{Name: n, Repo: repo}); err != nil {
			t.Fatal(err)
		}
	}
	one, two := recordOf(t, m, "one"), recordOf(t, m, "two")
	if len(one.Objects) != 1 || strings.Join(one.Objects, " ") != strings.Join(two.Objects, " ") || len(one.ObjectDirs) != 0 {
		t.Fatalf("exp one shared store, got %v and %v (%v)", one.Objects, two.Objects, one.ObjectDirs)
	}
	if exp := filepath.Join(state, objectsDir); !strings.HasPrefix(one.Objects[0], exp+"/") || filepath.Base(filepath.Dir(one.Objects[0])) != base {
		t.Fatalf("exp the store of %s under %s, got %s", base, exp, one.Objects[0])
	}
	reach := strings.Fields(gitOut(t, repo, "rev-list", "--objects", "--no-object-names", "main"))
	sort.Strings(reach)
	if got := storeObjects(t, one.Objects); strings.Join(got, " ") != strings.Join(reach, " ") {
		t.Fatalf("exp the store to hold what main reaches:\n%v\ngot\n%v", reach, got)
	}
	for _, d := range []string{filepath.Join(state, objectsDir), filepath.Dir(filepath.Dir(one.Objects[0]))} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("exp %s 0700, got %v %v", d, fi.Mode(), err)
		}
	}
	// Mounted read-only, named in the workspace's alternates.
	c := eng.containers[one.ContainerID]
	if len(c.spec.Mounts) != 1 || c.spec.Mounts[0].Source != one.Objects[0] || !c.spec.Mounts[0].ReadOnly || c.spec.Mounts[0].Target != "/.patina/repo/objects" {
		t.Fatalf("mounts: %+v", c.spec.Mounts)
	}
	if got := out(t, m, "one", "default", "cd "+one.Worktree+" && git log --format=%s && cat .git/objects/info/alternates && { git cat-file -e "+secret+" 2>/dev/null && echo SEEN || echo unseen; }"); got != "a.txt\ninit\n"+one.Objects[0]+"\nunseen\n" {
		t.Fatalf("inside: %q", got)
	}

	// The user moves on: a workspace of the new base extends the store.
	next := userCommit(t, repo, "b.txt", "b\n")
	if _, err := m.Create(ctx, CreateRequest{Name: "three", Repo: repo}); err != nil {
		t.Fatal(err)
	}
	three := recordOf(t, m, "three")
	if len(three.Objects) != 2 || three.Objects[0] != one.Objects[0] || filepath.Base(filepath.Dir(three.Objects[1])) != next+"-"+base {
		t.Fatalf("exp the base's store extended, got %v", three.Objects)
	}
	if got := storeObjects(t, three.Objects[1:]); len(got) != 3 { // commit, tree, blob
		t.Fatalf("exp the extension to hold the new commit, tree and blob, got %v", got)
	}
	if got := out(t, m, "three", "default", "cd "+three.Worktree+" && git log --format=%s && cat b.txt"); got != "b.txt\na.txt\ninit\nb\n" {
		t.Fatalf("inside the extended store: %q", got)
	}

	// Collected with their last borrower only.
	for _, tc := range []struct {
		del  string
		left int
	}{{"one", 2}, {"two", 2}, {"three", 0}} {
		if err := m.Delete(ctx, tc.del, false); err != nil {
			t.Fatal(err)
		}
		if got := storeDirs(t, state); len(got) != tc.left {
			t.Fatalf("after deleting %s: exp %d stores, got %v", tc.del, tc.left, got)
		}
	}
	m.stores.mu.Lock()
	defer m.stores.mu.Unlock()
	if len(m.stores.locks) != 0 || len(m.stores.holds) != 0 {
		t.Fatalf("exp no lock or hold left, got %v %v", m.stores.locks, m.stores.holds)
	}
}

// TestObjectStoreMadeAgain: a store removed behind the sidecar's back
// (while its workspace is stopped, or with the sidecar down) is made again
// when the workspace starts; stores nobody's record names, and what a
// crash left, go at the sidecar's start.
func TestObjectStoreMadeAgain(t *testing.T) {
	eng := newFakeEngine(t)
	state := t.TempDir()
	m := newManager(t, eng, state)
	ctx := context.Background()
	repo := gitRepo(t)
	userCommit(t, repo, "a.txt", "a\n")
	if _, err := m.Create(ctx, CreateRequest{Name: "w", Repo: repo}); err != nil {
		t.Fatal(err)
	}
	userCommit(t, repo, "b.txt", "b\n")
	if _, err := m.Create(ctx, CreateRequest{Name: "x", Repo: repo}); err != nil {
		t.Fatal(err)
	}
	if err := m.Delete(ctx, "w", false); err != nil {
		t.Fatal(err)
	}
	x := recordOf(t, m, "x")
	if len(x.Objects) != 2 {
		t.Fatalf("exp two stores, got %v", x.Objects)
	}
	if _, err := m.Stop(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	m.Close()
	// Both stores gone, and leftovers of a crash and of another run.
	if err := os.RemoveAll(filepath.Join(state, objectsDir)); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(storeOf(x.Objects[0]))
	junk := []string{
		filepath.Join(dir, strings.Repeat("ab", 20), "objects", "pack"),
		filepath.Join(dir, tmpPrefix+"123", "objects", "pack"),
		filepath.Join(dir, trashPrefix+"456", "store"),
	}
	old := time.Now().Add(-2 * leftoverAge)
	for _, j := range junk {
		if err := os.MkdirAll(j, 0o755); err != nil {
			t.Fatal(err)
		}
		top := filepath.Join(dir, strings.Split(strings.TrimPrefix(j, dir+"/"), "/")[0])
		if err := os.Chtimes(top, old, old); err != nil {
			t.Fatal(err)
		}
	}
	// A temporary directory of a moment ago may be a build's: it stays.
	fresh := filepath.Join(dir, tmpPrefix+"789")
	if err := os.MkdirAll(fresh, 0o755); err != nil {
		t.Fatal(err)
	}
	m2 := newManager(t, eng, state)
	select {
	case <-m2.Adopt():
	case <-time.After(20 * time.Second):
		t.Fatal("adoption did not finish")
	}
	if got := storeDirs(t, state); len(got) != 1 || got[0] != filepath.Base(fresh) {
		t.Fatalf("exp what nobody uses swept, but a fresh temporary directory, got %v", got)
	}
	if err := os.RemoveAll(fresh); err != nil {
		t.Fatal(err)
	}
	if _, err := m2.Start(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if got := storeDirs(t, state); len(got) != 2 {
		t.Fatalf("exp both stores made again, got %v", got)
	}
	if got := out(t, m2, "x", "default", "cd "+x.Worktree+" && git log --format=%s && git fsck --connectivity-only --no-dangling && echo ok"); got != "b.txt\na.txt\ninit\nok\n" {
		t.Fatalf("inside after the stores were made again: %q", got)
	}
}

// TestObjectStoreConcurrentCreates: workspaces of one base made at once
// share one store, made once.
func TestObjectStoreConcurrentCreates(t *testing.T) {
	eng := newFakeEngine(t)
	state := t.TempDir()
	var logs syncbuf.Buffer
	m, err := New(Config{StateDir: state, DefaultImage: "img", Logger: slog.New(slog.NewJSONHandler(&logs, nil))}, eng, fakeImages{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	t.Cleanup(func() { unsealAll(filepath.Join(state, "worktrees")) })
	ctx := context.Background()
	repo := gitRepo(t)
	userCommit(t, repo, "a.txt", "a\n")
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = m.Create(ctx, CreateRequest{Name: "c" + string(rune('0'+i)), Repo: repo})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	made := 0
	for _, line := range strings.Split(logs.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "object store made" {
			made++
		}
	}
	if made != 1 || len(storeDirs(t, state)) != 1 {
		t.Fatalf("exp one store made once, got %d makes, %v", made, storeDirs(t, state))
	}
}

// TestObjectStoreOldRecordMoves: a workspace made before the stores (its
// record names the user's object directory, its container mounts it) keeps
// working and moves at its next start: its container is committed and made
// anew with the store, its files and repository kept.
func TestObjectStoreOldRecordMoves(t *testing.T) {
	eng := newFakeEngine(t)
	state := t.TempDir()
	m := newManager(t, eng, state)
	ctx := context.Background()
	repo := gitRepo(t)
	userCommit(t, repo, "a.txt", "a\n")
	if _, err := m.Create(ctx, CreateRequest{Name: "old", Repo: repo}); err != nil {
		t.Fatal(err)
	}
	md := recordOf(t, m, "old")
	out(t, m, "old", "default", "cd "+md.Worktree+" && echo inside > in.txt && git add in.txt && git commit -qm inside && echo wip > wip.txt")
	m.Close()
	// The record of the patina before: the user's objects, mounted.
	userObjects := filepath.Join(repo, ".git", "objects")
	path := filepath.Join(state, "workspaces", md.ID, metaFile)
	old, err := readRecord(path)
	if err != nil {
		t.Fatal(err)
	}
	old.Objects, old.ObjectDirs = nil, []string{userObjects}
	if err := writeJSONFile(path, old); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(state, objectsDir)); err != nil {
		t.Fatal(err)
	}
	// What the old patina's Init wrote (the fake engine maps mounts to
	// their sources).
	if err := os.WriteFile(filepath.Join(md.Worktree, ".git", "objects", "info", "alternates"), []byte(userObjects+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	eng.mu.Lock()
	c := eng.containers[md.ContainerID]
	c.spec.Mounts = newWorkspace(m, old).spec().Mounts
	eng.mu.Unlock()

	m2 := newManager(t, eng, state)
	<-m2.Adopt()
	if w, _ := m2.Get("old"); w.Status != StatusRunning || w.Notice != movedNotice {
		t.Fatalf("exp the running old workspace kept and told of, got %+v", w)
	}
	if got := out(t, m2, "old", "default", "cd "+md.Worktree+" && git log --format=%s -1"); got != "inside\n" {
		t.Fatalf("the old workspace before its move: %q", got)
	}
	if _, err := m2.Start(ctx, "old"); err != nil { // running: left as it is
		t.Fatal(err)
	}
	if rec := recordOf(t, m2, "old"); len(rec.ObjectDirs) != 1 || rec.ContainerID != md.ContainerID {
		t.Fatalf("exp a running old workspace left on its mounts, got %+v", rec)
	}
	if _, err := m2.Stop(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	w, err := m2.Start(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	rec := recordOf(t, m2, "old")
	if len(rec.ObjectDirs) != 0 || len(rec.Objects) != 1 || rec.ContainerID == md.ContainerID || rec.MovedImage != "patina/moved:"+md.ID || rec.Image != rec.MovedImage || w.Notice == movedNotice {
		t.Fatalf("exp the workspace moved to a store in a new container from its committed image, got %+v (%s)", rec, w.Notice)
	}
	eng.mu.Lock()
	mounts := eng.containers[rec.ContainerID].spec.Mounts
	imgs := append([]string(nil), eng.images...)
	eng.mu.Unlock()
	if len(mounts) != 1 || mounts[0].Source != rec.Objects[0] || len(imgs) != 1 || imgs[0] != rec.MovedImage {
		t.Fatalf("exp only the store mounted and the old container committed, got %+v %v", mounts, imgs)
	}
	if got := out(t, m2, "old", "default", "cd "+md.Worktree+" && git log --format=%s && cat wip.txt && cat .git/objects/info/alternates"); got != "inside\na.txt\ninit\nwip\n"+rec.Objects[0]+"\n" {
		t.Fatalf("the workspace after its move: %q", got)
	}
	d, err := m2.Diff(ctx, "old")
	if err != nil || len(d.Files) != 2 {
		t.Fatalf("diff after the move: %+v %v", d, err)
	}
	if err := m2.Delete(ctx, "old", false); err != nil {
		t.Fatal(err)
	}
	if got := storeDirs(t, state); len(got) != 0 {
		t.Fatalf("exp the store collected, got %v", got)
	}
}
