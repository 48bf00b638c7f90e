package worktree

import (
	"fmt"
	"testing"
)

func TestGet(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ctx := testCtx(t)
	ws := mustCreate(t, r, CreateRequest{Name: "getme"})
	for _, key := range []string{"getme", ws.ID} {
		got, err := r.Get(ctx, key)
		if err != nil || got.ID != ws.ID {
			t.Errorf("Get(%q): exp %s, got %+v, %v", key, ws.ID, got, err)
		}
	}
	_, err := r.Get(ctx, "nobody")
	wantErr(t, err, ErrNotFound)
	_, err = r.Get(ctx, "../x")
	wantErr(t, err, ErrInvalidName)
}

// Notes travel with repositories, so a hostile or broken state note must
// not become a path or hide the other workspaces.
func TestListSkipsBadNotes(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	mustCreate(t, r, CreateRequest{Name: "good"})
	head := gitT(t, repo, "rev-parse", "HEAD")
	first := gitT(t, repo, "rev-parse", "HEAD~1")
	gitT(t, repo, "notes", "--ref", "patina-state", "add", "-m", "not json", head)
	evil := fmt.Sprintf(`{"version":1,"id":"7d444840-9dc0-11d1-b245-5ffdce74fad2","name":"../../../etc","base_commit":"%s"}`, head)
	gitT(t, repo, "notes", "--ref", "patina-state", "add", "-m", evil, first)

	list, err := r.List(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Name != "good" {
		t.Fatalf("exp only the good workspace, got %+v", list)
	}
}
