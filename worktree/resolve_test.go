package worktree

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"os/exec"
	"reflect"
	"strings"
	"testing"
)

// plantTwins writes two unreferenced commits whose ids share their first
// four hex digits (as a workspace could, in a pack it sends) and returns
// them.
func plantTwins(t *testing.T, repo string) (string, string) {
	t.Helper()
	tree := gitT(t, repo, "rev-parse", "main^{tree}")
	body := func(i int) string {
		return fmt.Sprintf("tree %s\nauthor t <t@t> 0 +0000\ncommitter t <t@t> 0 +0000\n\ntwin %d\n", tree, i)
	}
	write := func(b string) string {
		cmd := exec.Command("git", "hash-object", "-t", "commit", "-w", "--stdin")
		cmd.Dir = repo
		cmd.Stdin = strings.NewReader(b)
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	seen := map[string]int{}
	for i := 0; ; i++ {
		b := body(i)
		sum := sha1.Sum([]byte(fmt.Sprintf("commit %d\x00%s", len(b), b)))
		p := hex.EncodeToString(sum[:])[:4]
		if j, ok := seen[p]; ok {
			return write(body(j)), write(b)
		}
		seen[p] = i
	}
}

func TestResolveCommit(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ctx := testCtx(t)
	main := gitT(t, repo, "rev-parse", "main")
	tree := gitT(t, repo, "rev-parse", "main^{tree}")
	a, b := plantTwins(t, repo)

	for _, in := range []string{main, main[:10], strings.ToUpper(main[:7]), main[:4]} {
		if in == main[:4] && (strings.HasPrefix(a, in) || strings.HasPrefix(tree, in)) {
			continue // a rare clash with the planted commits or the tree
		}
		if got, err := r.ResolveCommit(ctx, in); err != nil || got != main {
			t.Errorf("ResolveCommit(%q): exp %s, got %q, %v", in, main, got, err)
		}
	}
	// A prefix of a tree only: no commit.
	if _, err := r.ResolveCommit(ctx, tree); !errors.Is(err, ErrNotFound) {
		t.Errorf("ResolveCommit(tree): exp ErrNotFound, got %v", err)
	}
	_, err := r.ResolveCommit(ctx, a[:4])
	var ae *AmbiguousError
	if !errors.As(err, &ae) || !errors.Is(err, ErrAmbiguous) || ae.Prefix != a[:4] || len(ae.Commits) < 2 ||
		!strings.Contains(err.Error(), "give more of it") {
		t.Fatalf("ResolveCommit(%s): exp ambiguous, got %v", a[:4], err)
	}
	for _, full := range []string{a, b} {
		if got, err := r.ResolveCommit(ctx, full[:len(full)-1]); err != nil || got != full {
			t.Errorf("ResolveCommit(%s…): exp %s, got %q, %v", full[:8], full, got, err)
		}
	}
	for _, bad := range []string{"", "abc", "-rf", "HEAD", "main", main + "0", "g123", main[:8] + "^", "--all"} {
		if _, err := r.ResolveCommit(ctx, bad); !errors.Is(err, ErrInvalidName) {
			t.Errorf("ResolveCommit(%q): exp ErrInvalidName, got %v", bad, err)
		}
	}
	if _, err := r.ResolveCommit(ctx, "0000000000"); !errors.Is(err, ErrNotFound) {
		t.Errorf("ResolveCommit(unknown): exp ErrNotFound, got %v", err)
	}
}

func TestReadCommit(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ctx := testCtx(t)
	main := gitT(t, repo, "rev-parse", "main")
	got, err := r.ReadCommit(ctx, main)
	exp := CommitInfo{ID: main, Tree: gitT(t, repo, "rev-parse", "main^{tree}"), Parents: []string{gitT(t, repo, "rev-parse", "main^")}}
	if err != nil || !reflect.DeepEqual(exp, got) {
		t.Fatalf("exp %+v, got %+v, %v", exp, got, err)
	}
	root := gitT(t, repo, "rev-parse", "main^")
	if got, err := r.ReadCommit(ctx, root); err != nil || len(got.Parents) != 0 {
		t.Fatalf("root commit: %+v, %v", got, err)
	}
	for _, oid := range []string{exp.Tree, strings.Repeat("0", len(main))} {
		if _, err := r.ReadCommit(ctx, oid); !errors.Is(err, ErrNotFound) {
			t.Errorf("ReadCommit(%s): exp ErrNotFound, got %v", oid, err)
		}
	}
	if _, err := r.ReadCommit(ctx, "HEAD"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("ReadCommit(HEAD): exp ErrInvalidName, got %v", err)
	}
}
