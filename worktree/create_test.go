package worktree

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestCreate(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	before := snapshotUser(t, repo)
	head := gitT(t, repo, "rev-parse", "HEAD")

	ws := mustCreate(t, r, CreateRequest{Image: "debian:bookworm", Meta: json.RawMessage(`{"container": "c1",  "sessions": []}`)})

	if err := ValidateName(ws.Name); err != nil || len(ws.Name) != 8 {
		t.Errorf("exp a generated 8-character name, got %q (%v)", ws.Name, err)
	}
	if !isUUID(ws.ID) {
		t.Errorf("exp uuid id, got %q", ws.ID)
	}
	if exp, got := "patina/"+ws.Name, ws.Branch; exp != got {
		t.Errorf("exp branch %s, got %s", exp, got)
	}
	if exp, got := repo, ws.Repo; exp != got {
		t.Errorf("exp repo %s, got %s", exp, got)
	}
	if exp, got := filepath.Join(repo, ".git"), ws.GitCommonDir; exp != got {
		t.Errorf("exp common dir %s, got %s", exp, got)
	}
	if exp, got := []string{filepath.Join(repo, ".git", "objects")}, ws.ObjectDirs; !reflect.DeepEqual(exp, got) {
		t.Errorf("exp object dirs %q, got %q", exp, got)
	}
	if exp, got := "refs/heads/main", ws.BaseRef; exp != got {
		t.Errorf("exp base ref %s, got %s", exp, got)
	}
	if exp, got := head, ws.BaseCommit; exp != got {
		t.Errorf("exp base commit %s, got %s", exp, got)
	}
	if exp, got := `{"container":"c1","sessions":[]}`, string(ws.Meta); exp != got {
		t.Errorf("exp meta %s, got %s", exp, got)
	}
	if time.Since(ws.CreatedAt) > time.Minute || ws.Image != "debian:bookworm" || ws.Format != FormatCurrent || ws.Legacy || ws.LegacyPath != "" {
		t.Errorf("unexpected workspace %+v", ws)
	}

	// The branch starts at the base commit itself: no start commit.
	if exp, got := head, gitT(t, repo, "rev-parse", "refs/heads/patina/"+ws.Name); exp != got {
		t.Errorf("exp branch at the base %s, got %s", exp, got)
	}
	if exp, got := head, ws.Head; exp != got {
		t.Errorf("exp head %s, got %s", exp, got)
	}
	// The notes hang on an anchor blob of the workspace's own.
	if exp, got := "blob", gitT(t, repo, "cat-file", "-t", ws.Anchor); exp != got {
		t.Errorf("exp the anchor to be a %s, got %s", exp, got)
	}
	if exp, got := "patina workspace "+ws.ID, gitT(t, repo, "cat-file", "blob", ws.Anchor); exp != got {
		t.Errorf("exp anchor content %q, got %q", exp, got)
	}
	if !strings.Contains(gitT(t, repo, "notes", "--ref", "patina-state", "show", ws.Anchor), ws.ID) {
		t.Errorf("exp the state note on the anchor")
	}
	wantSameUser(t, before, snapshotUser(t, repo))
}

func TestCreateBases(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	first := gitT(t, repo, "rev-parse", "HEAD~1")
	second := gitT(t, repo, "rev-parse", "HEAD")
	gitT(t, repo, "tag", "v1", first)
	gitT(t, repo, "branch", "feature/x", first)

	tests := []struct {
		name, base        string
		expRef, expCommit string
	}{
		{"branch", "main", "refs/heads/main", second},
		{"full-ref", "refs/heads/main", "refs/heads/main", second},
		{"slash-branch", "feature/x", "refs/heads/feature/x", first},
		{"tag", "v1", "refs/tags/v1", first},
		{"commit", first, "", first},
		{"relative", "HEAD~1", "", first},
		{"head", "HEAD", "refs/heads/main", second},
	}
	for _, tc := range tests {
		ws := mustCreate(t, r, CreateRequest{Name: tc.name, Base: tc.base})
		if ws.BaseRef != tc.expRef || ws.BaseCommit != tc.expCommit {
			t.Errorf("base %q: exp %q at %s, got %q at %s", tc.base, tc.expRef, tc.expCommit, ws.BaseRef, ws.BaseCommit)
		}
	}

	// A detached HEAD as the default base: no base ref.
	gitT(t, repo, "checkout", "-q", "--detach", first)
	ws := mustCreate(t, r, CreateRequest{Name: "detached"})
	if ws.BaseRef != "" || ws.BaseCommit != first {
		t.Errorf("detached HEAD: exp no ref at %s, got %q at %s", first, ws.BaseRef, ws.BaseCommit)
	}
}

// A workspace made with the id it is given (the sidecar's warm pool makes
// the container first): Get finds it by that id.
func TestCreateWithID(t *testing.T) {
	t.Parallel()
	r := openRepo(t, newUserRepo(t))
	ctx := testCtx(t)
	const id = "0b8f6a52-4c1d-4f0e-9a57-3f3c2f1e9d01"
	ws := mustCreate(t, r, CreateRequest{Name: "given", ID: id})
	if ws.ID != id {
		t.Fatalf("exp id %s, got %s", id, ws.ID)
	}
	got, err := r.Get(ctx, id)
	if err != nil || got.Name != "given" {
		t.Fatalf("exp workspace given by its id, got %+v, %v", got, err)
	}
}

func TestCreateRefuses(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ctx := testCtx(t)
	mustCreate(t, r, CreateRequest{Name: "taken"})
	gitT(t, repo, "branch", "patina/userbranch")

	tests := []struct {
		req CreateRequest
		exp error
	}{
		{CreateRequest{Name: "taken"}, ErrExists},
		{CreateRequest{Name: "userbranch"}, ErrExists},
		{CreateRequest{Name: "../escape"}, ErrInvalidName},
		{CreateRequest{Name: "-x"}, ErrInvalidName},
		{CreateRequest{Name: "ok1", Base: "--orphan"}, ErrInvalidName},
		{CreateRequest{Name: "ok2", Base: "no-such-branch"}, ErrNotFound},
		{CreateRequest{Name: "ok3", Base: strings.Repeat("f", 40)}, ErrNotFound},
	}
	for _, tc := range tests {
		_, err := r.Create(ctx, tc.req)
		if !errors.Is(err, tc.exp) {
			t.Errorf("Create(%+v): exp %v, got %v", tc.req, tc.exp, err)
		}
	}
	if _, err := r.Create(ctx, CreateRequest{Name: "badmeta", Meta: json.RawMessage(`{nope`)}); err == nil {
		t.Errorf("exp invalid meta refused")
	}
	taken, err := r.List(ctx)
	if err != nil || len(taken) != 1 {
		t.Fatalf("exp one workspace, got %v, %v", taken, err)
	}
	for _, id := range []string{"not-a-uuid", taken[0].ID} {
		if _, err := r.Create(ctx, CreateRequest{Name: "withid", ID: id}); err == nil {
			t.Errorf("exp id %q refused", id)
		}
	}
	list, err := r.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if exp, got := 1, len(list); exp != got {
		t.Fatalf("exp %d workspace after refusals, got %d: %+v", exp, got, list)
	}
	branches := gitT(t, repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/patina/")
	if exp, got := "patina/taken\npatina/userbranch", branches; exp != got {
		t.Fatalf("exp branches %q, got %q", exp, got)
	}
}

// 20 workspaces created at once in one repository, through two Repo
// values, all succeed with distinct branches and anchors.
func TestCreateConcurrent(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	state := t.TempDir()
	repos := []*Repo{openRepoState(t, repo, state), openRepoState(t, repo, state)}
	const n = 20
	var wg sync.WaitGroup
	results := make([]Workspace, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			req := CreateRequest{}
			if i%2 == 0 {
				req.Name = fmt.Sprintf("named-%d", i)
			}
			results[i], errs[i] = repos[i%2].Create(testCtx(t), req)
		})
	}
	wg.Wait()
	branches, ids, anchors := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
		branches[results[i].Branch] = true
		ids[results[i].ID] = true
		anchors[results[i].Anchor] = true
	}
	if len(branches) != n || len(ids) != n || len(anchors) != n {
		t.Fatalf("exp %d distinct branches, ids and anchors, got %d, %d and %d", n, len(branches), len(ids), len(anchors))
	}
	list, err := repos[0].List(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if exp, got := n, len(list); exp != got {
		t.Fatalf("exp %d listed, got %d", exp, got)
	}
	for _, ws := range list {
		if !branches[ws.Branch] {
			t.Errorf("unexpected listed workspace %+v", ws)
		}
	}
	if _, err := gitTry(repo, "fsck", "--no-progress"); err != nil {
		t.Fatalf("fsck: %v", err)
	}
}
