package worktree

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// objectsIn lists the ids of the objects in an object directory (its
// packs and loose objects), sorted.
func objectsIn(t *testing.T, objects string) []string {
	t.Helper()
	ids := strings.Fields(catFileIn(t, objects, "--batch-all-objects", "--batch-check=%(objectname)"))
	sort.Strings(ids)
	return ids
}

// catFileIn runs git cat-file on an object directory alone (in an empty
// repository: no refs, no replace refs, no alternates).
func catFileIn(t *testing.T, objects string, args ...string) string {
	t.Helper()
	repo := filepath.Join(t.TempDir(), "r.git")
	gitT(t, t.TempDir(), "init", "-q", "--bare", repo)
	out, err := gitTryEnvIn(repo, []string{"GIT_OBJECT_DIRECTORY=" + objects}, "", append([]string{"cat-file"}, args...)...)
	if err != nil {
		t.Fatalf("cat-file %v in %s: %v", args, objects, err)
	}
	return out
}

// reachable lists the objects commit reaches in repo, less what exclude
// reaches, sorted.
func reachable(t *testing.T, repo, commit, exclude string) []string {
	t.Helper()
	args := []string{"rev-list", "--objects", "--no-object-names", commit}
	if exclude != "" {
		args = append(args, "^"+exclude)
	}
	ids := strings.Fields(gitT(t, repo, args...))
	sort.Strings(ids)
	return ids
}

func mustCommitPack(t *testing.T, r *Repo, commit, exclude string) string {
	t.Helper()
	objects := filepath.Join(t.TempDir(), "objects")
	if err := os.MkdirAll(filepath.Join(objects, "pack"), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := r.WriteCommitPack(testCtx(t), CommitPackRequest{Commit: commit, Exclude: exclude, Dir: filepath.Join(objects, "pack")})
	if err != nil {
		t.Fatalf("WriteCommitPack(%s ^%s): %v", commit, exclude, err)
	}
	if !strings.HasPrefix(p.Name, "pack-") || p.Bytes <= 0 {
		t.Fatalf("unexpected pack %+v", p)
	}
	return objects
}

// TestWriteCommitPack: the pack of a commit holds exactly what the commit
// reaches, not another branch's objects, notes, anchors or loose objects
// nothing reaches, nor what a replace ref would substitute; a pack that
// excludes an ancestor holds the rest and stands alone; a workspace reading
// both through its alternates has the whole history.
func TestWriteCommitPack(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ctx := testCtx(t)
	old := gitT(t, repo, "rev-parse", "main^")
	gitT(t, repo, "checkout", "-q", "-b", "other")
	writeFile(t, filepath.Join(repo, "secret.env"), "TOKEN=on-another-branch\n")
	gitT(t, repo, "add", "secret.env")
	gitT(t, repo, "commit", "-q", "-m", "secret")
	secret := gitT(t, repo, "rev-parse", "other:secret.env")
	gitT(t, repo, "checkout", "-q", "main")
	loose := gitTryEnvInMust(t, repo, "loose, nothing reaches it\n", "hash-object", "-w", "--stdin")
	ws := mustCreate(t, r, CreateRequest{Name: "noted"}) // notes and an anchor
	main := ws.BaseCommit
	// A replace ref that would show the secret in place of src/a.txt.
	alpha := gitT(t, repo, "rev-parse", "main:src/a.txt")
	gitT(t, repo, "replace", alpha, secret)

	full := mustCommitPack(t, r, main, "")
	got := objectsIn(t, full)
	if exp := reachable(t, repo, main, ""); strings.Join(exp, " ") != strings.Join(got, " ") {
		t.Fatalf("exp exactly the %d objects main reaches, got %d:\n%v\n%v", len(exp), len(got), exp, got)
	}
	for name, id := range map[string]string{"the other branch's blob": secret, "a loose object": loose, "the anchor": r.format.anchorID(ws.ID)} {
		for _, g := range got {
			if g == id {
				t.Fatalf("%s (%s) is in the pack", name, id)
			}
		}
	}
	for _, ref := range []string{"refs/notes/patina-state", "refs/notes/patina-log"} {
		note := gitT(t, repo, "rev-parse", ref)
		for _, g := range got {
			if g == note {
				t.Fatalf("the notes commit of %s is in the pack", ref)
			}
		}
	}
	// The replace ref was ignored: src/a.txt is itself in the pack.
	if blob := catFileIn(t, full, "blob", alpha); blob != "alpha" {
		t.Fatalf("exp the original src/a.txt in the pack, got %q", blob)
	}

	// Incremental: old's pack, then main ^old.
	base := mustCommitPack(t, r, old, "")
	delta := mustCommitPack(t, r, main, old)
	if exp, got := reachable(t, repo, main, old), objectsIn(t, delta); strings.Join(exp, " ") != strings.Join(got, " ") {
		t.Fatalf("exp the objects of main ^old, got %v, want %v", got, exp)
	}
	// It stands alone: no delta against an object it does not hold.
	packs, _ := filepath.Glob(filepath.Join(delta, "pack", "*.idx"))
	if len(packs) != 1 {
		t.Fatalf("exp one index, got %v", packs)
	}
	if _, err := gitTry(repo, "verify-pack", packs[0]); err != nil {
		t.Fatalf("the incremental pack does not stand alone: %v", err)
	}
	in := &Inside{Dir: filepath.Join(tempDir(t), "workspace"), Logger: testLogger(t)}
	if _, err := in.Init(ctx, InitRequest{Branch: ws.Branch, Base: main, Alternates: []string{base, delta}, Identity: &agentIdentity}); err != nil {
		t.Fatalf("Init on the two packs: %v", err)
	}
	if exp, got := "src\ninit", gitT(t, in.Dir, "log", "--format=%s"); exp != got {
		t.Fatalf("exp the whole history, got %q", got)
	}
	gitT(t, in.Dir, "blame", "README.md")
	gitT(t, in.Dir, "fsck", "--connectivity-only")
	if _, err := gitTry(in.Dir, "cat-file", "-e", secret); err == nil {
		t.Fatal("the other branch's blob is readable in the workspace")
	}

	// Bad input never reaches git.
	var ne *NameError
	for _, req := range []CommitPackRequest{
		{Commit: "--all", Dir: base},
		{Commit: main, Exclude: "HEAD", Dir: base},
	} {
		if _, err := r.WriteCommitPack(ctx, req); !errors.As(err, &ne) {
			t.Fatalf("%+v: exp a NameError, got %v", req, err)
		}
	}
	if _, err := r.WriteCommitPack(ctx, CommitPackRequest{Commit: main, Dir: "relative"}); err == nil {
		t.Fatal("exp a relative directory refused")
	}
}

func gitTryEnvInMust(t *testing.T, dir, stdin string, args ...string) string {
	t.Helper()
	out, err := gitTryEnvIn(dir, nil, stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestNearestAncestor: of the candidates, the ancestor of the commit
// closest to it; others, garbage and unknown ids are passed over.
func TestNearestAncestor(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ctx := testCtx(t)
	first := gitT(t, repo, "rev-parse", "main^")
	second := gitT(t, repo, "rev-parse", "main")
	gitT(t, repo, "checkout", "-q", "-b", "side", first)
	writeFile(t, filepath.Join(repo, "side.txt"), "side\n")
	gitT(t, repo, "add", "-A")
	gitT(t, repo, "commit", "-q", "-m", "side")
	side := gitT(t, repo, "rev-parse", "HEAD")
	gitT(t, repo, "checkout", "-q", "main")
	writeFile(t, filepath.Join(repo, "third.txt"), "3\n")
	gitT(t, repo, "add", "-A")
	gitT(t, repo, "commit", "-q", "-m", "third")
	third := gitT(t, repo, "rev-parse", "HEAD")
	unknown := strings.Repeat("ab", 20)
	for _, tc := range []struct {
		commit     string
		candidates []string
		exp        string
		ok         bool
	}{
		{third, []string{first, side, "--all", unknown, second}, second, true},
		{third, []string{first}, first, true},
		{third, []string{third, first}, third, true},
		{third, []string{side, unknown}, "", false},
		{second, nil, "", false},
	} {
		got, ok, err := r.NearestAncestor(ctx, tc.commit, tc.candidates)
		if err != nil || got != tc.exp || ok != tc.ok {
			t.Errorf("NearestAncestor(%.7s, %v): exp %.7s %v, got %.7s %v %v", tc.commit, tc.candidates, tc.exp, tc.ok, got, ok, err)
		}
	}
	if ok, err := r.IsAncestor(ctx, first, third); !ok || err != nil {
		t.Fatalf("IsAncestor(first, third): %v %v", ok, err)
	}
	if ok, err := r.IsAncestor(ctx, side, third); ok || err != nil {
		t.Fatalf("IsAncestor(side, third): %v %v", ok, err)
	}
}

// TestWriteCommitPackFromAlternates: a repository that borrows its objects
// (git clone --shared) gives a pack holding them all: the store stands
// alone, nothing of the lender is mounted.
func TestWriteCommitPackFromAlternates(t *testing.T) {
	t.Parallel()
	lender := newUserRepo(t)
	repo := filepath.Join(tempDir(t), "borrower")
	gitT(t, lender, "clone", "-q", "--shared", lender, repo)
	writeFile(t, filepath.Join(repo, "own.txt"), "own\n")
	gitT(t, repo, "add", "own.txt")
	gitT(t, repo, "commit", "-q", "-m", "own")
	r := openRepo(t, repo)
	head := gitT(t, repo, "rev-parse", "HEAD")
	objs := mustCommitPack(t, r, head, "")
	if exp, got := reachable(t, repo, head, ""), objectsIn(t, objs); strings.Join(exp, " ") != strings.Join(got, " ") {
		t.Fatalf("exp the borrowed objects in the pack too:\n%v\ngot\n%v", exp, got)
	}
}

// TestWriteCommitPackOddPath: a repository whose path holds the
// alternates separator and a quote.
func TestWriteCommitPackOddPath(t *testing.T) {
	t.Parallel()
	src := newUserRepo(t)
	repo := filepath.Join(tempDir(t), `odd:"path`)
	if err := os.Rename(src, repo); err != nil {
		t.Fatal(err)
	}
	r := openRepo(t, repo)
	head := gitT(t, repo, "rev-parse", "HEAD")
	if exp, got := reachable(t, repo, head, ""), objectsIn(t, mustCommitPack(t, r, head, "")); strings.Join(exp, " ") != strings.Join(got, " ") {
		t.Fatalf("exp the objects of %s, got %v", head, got)
	}
}
