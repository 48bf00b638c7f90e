package worktree

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// TestShipObjects: a workspace on another machine starts from objects
// shipped into a store of its own (no access to the user's objects), and
// its work comes back, checked, as from any workspace.
func TestShipObjects(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ctx := testCtx(t)
	ws := mustCreate(t, r, CreateRequest{Name: "shipped"})

	var pack bytes.Buffer
	if err := r.PackCommit(ctx, ws.BaseCommit, &pack); err != nil {
		t.Fatalf("PackCommit: %v", err)
	}
	remote := tempDir(t) // the other machine
	store := Store{Dir: filepath.Join(remote, "state", "base.git")}
	if ok, err := store.Has(ctx, ws.BaseCommit); ok || err != nil {
		t.Fatalf("exp an empty store to lack the base, got %v, %v", ok, err)
	}
	if err := store.Receive(ctx, ws.BaseCommit, bytes.NewReader(pack.Bytes())); err != nil {
		t.Fatalf("Receive: %v", err)
	}
	if ok, err := store.Has(ctx, ws.BaseCommit); !ok || err != nil {
		t.Fatalf("exp the store to have the base, got %v, %v", ok, err)
	}
	in := &Inside{Dir: filepath.Join(remote, "workspace"), Logger: testLogger(t)}
	if _, err := in.Init(ctx, InitRequest{Branch: ws.Branch, Base: ws.BaseCommit, Alternates: []string{store.Objects()}, Identity: &agentIdentity}); err != nil {
		t.Fatalf("Init on the store: %v", err)
	}
	if exp, got := "alpha\n", readFile(t, filepath.Join(in.Dir, "src", "a.txt")); exp != got {
		t.Fatalf("exp the base checked out from the store, got %q", got)
	}

	// The round trip: commit inside, diff, record, merge.
	writeFile(t, filepath.Join(in.Dir, "src", "b.txt"), "from afar\n")
	if d := diffOf(t, r, ws, in); !strings.Contains(d.Text, "+from afar") {
		t.Fatalf("exp the diff to show the new file, got %q", d.Text)
	}
	c := agentCommit(t, r, ws, in, map[string]string{"src/c.txt": "more\n"})
	if _, err := r.Merge(ctx, ws.Name, MergeRequest{}); err != nil {
		t.Fatalf("Merge: %v", err)
	}
	if exp, got := c, gitT(t, repo, "rev-parse", "HEAD"); exp != got {
		t.Fatalf("exp the workspace's commit %s fast-forwarded, got HEAD %s", exp, got)
	}
	if exp, got := "from afar\n", readFile(t, filepath.Join(repo, "src", "b.txt")); exp != got {
		t.Fatalf("exp the merged file in the user's tree, got %q", got)
	}

	// Receiving again is harmless (a restarted workspace that lost track).
	if err := store.Receive(ctx, ws.BaseCommit, bytes.NewReader(pack.Bytes())); err != nil {
		t.Fatalf("Receive again: %v", err)
	}
	// A truncated pack is refused, and the store still serves.
	other := Store{Dir: filepath.Join(tempDir(t), "base.git")}
	if err := other.Receive(ctx, ws.BaseCommit, bytes.NewReader(pack.Bytes()[:pack.Len()/2])); err == nil {
		t.Fatal("exp a truncated pack refused")
	}
	if ok, _ := other.Has(ctx, ws.BaseCommit); ok {
		t.Fatal("exp no base from a truncated pack")
	}
	// Bad ids never reach git.
	var ne *NameError
	if err := r.PackCommit(ctx, "--all", &pack); !errors.As(err, &ne) {
		t.Fatalf("exp a NameError for an option as a commit, got %v", err)
	}
	if _, err := store.Has(ctx, "HEAD"); !errors.As(err, &ne) {
		t.Fatalf("exp a NameError for a ref as a commit, got %v", err)
	}
}
