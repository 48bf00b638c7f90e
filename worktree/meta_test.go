package worktree

import (
	"encoding/json"
	"testing"
)

func TestSetMeta(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ctx := testCtx(t)
	ws := mustCreate(t, r, CreateRequest{Name: "meta", Image: "keep", Meta: json.RawMessage(`{"old":true}`)})

	got, err := r.SetMeta(ctx, "meta", json.RawMessage(` {"new": 1} `))
	if err != nil {
		t.Fatal(err)
	}
	if exp := `{"new":1}`; string(got.Meta) != exp {
		t.Fatalf("exp meta %s, got %s", exp, got.Meta)
	}
	reread := mustGet(t, r, "meta")
	if string(reread.Meta) != `{"new":1}` || reread.Image != "keep" || reread.BaseCommit != ws.BaseCommit {
		t.Fatalf("exp the note rewritten whole with only meta changed, got %+v", reread)
	}
	if _, err := r.SetMeta(ctx, "meta", nil); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, r, "meta").Meta; got != nil {
		t.Fatalf("exp meta cleared, got %s", got)
	}
	if _, err := r.SetMeta(ctx, "meta", json.RawMessage(`{`)); err == nil {
		t.Fatalf("exp invalid JSON refused")
	}
	_, err = r.SetMeta(ctx, "ghost", json.RawMessage(`{}`))
	wantErr(t, err, ErrNotFound)
}
