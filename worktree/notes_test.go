package worktree

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestStateNoteFormat(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ws := mustCreate(t, r, CreateRequest{Name: "notes", Image: "img:1", Meta: json.RawMessage(`{"k":"v"}`)})

	raw := gitT(t, repo, "notes", "--ref", "patina-state", "show", ws.Commit)
	var got map[string]any
	if err := json.Unmarshal([]byte(raw), &got); err != nil {
		t.Fatalf("state note is not JSON: %v\n%s", err, raw)
	}
	exp := map[string]any{
		"version":     float64(1),
		"id":          ws.ID,
		"name":        "notes",
		"branch":      "patina/notes",
		"base_ref":    "refs/heads/main",
		"base_commit": ws.BaseCommit,
		"created_at":  ws.CreatedAt.Format(time.RFC3339Nano),
		"image":       "img:1",
		"meta":        map[string]any{"k": "v"},
	}
	if !reflect.DeepEqual(exp, got) {
		t.Fatalf("state note:\nexp %v\ngot %v", exp, got)
	}

	// The log is readable with plain git.
	logText := gitT(t, repo, "notes", "--ref", "patina-log", "show", ws.Commit)
	if !strings.Contains(logText, " created: branch patina/notes from refs/heads/main at "+ws.BaseCommit) {
		t.Fatalf("exp a created line in the log note, got %q", logText)
	}
}

// A fresh Repo value (a restarted sidecar) finds every workspace again,
// with its metadata and log, from the notes alone.
func TestReloadFromNotes(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	state := t.TempDir()
	ctx := context.Background()
	r := openRepoState(t, repo, state)
	a := mustCreate(t, r, CreateRequest{Name: "alpha", Image: "i1"})
	mustCreate(t, r, CreateRequest{Name: "bravo", Base: "HEAD~1", Meta: json.RawMessage(`{"n":1}`)})
	if _, err := r.SetMeta(ctx, "alpha", json.RawMessage(`{"container":"abc","sessions":["s1"]}`)); err != nil {
		t.Fatal(err)
	}
	code := 3
	if err := r.AppendLog(ctx, a.ID, Event{Kind: EventCommand, Message: "make test", ExitCode: &code}); err != nil {
		t.Fatal(err)
	}
	oldList, err := r.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	oldLog, err := r.Log(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}

	fresh := openRepoState(t, repo, state)
	newList, err := fresh.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(oldList, newList) {
		t.Fatalf("reloaded list differs:\nexp %+v\ngot %+v", oldList, newList)
	}
	if exp, got := []string{"alpha", "bravo"}, []string{newList[0].Name, newList[1].Name}; !reflect.DeepEqual(exp, got) {
		t.Fatalf("exp %v oldest first, got %v", exp, got)
	}
	if exp, got := `{"container":"abc","sessions":["s1"]}`, string(newList[0].Meta); exp != got {
		t.Fatalf("exp meta %s, got %s", exp, got)
	}
	newLog, err := fresh.Log(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(oldLog, newLog) || len(newLog) != 2 {
		t.Fatalf("reloaded log differs:\nexp %+v\ngot %+v", oldLog, newLog)
	}

	// Another state dir (the CLI, say) still finds the worktrees where git has them.
	elsewhere := openRepo(t, repo)
	ws := mustGet(t, elsewhere, "alpha")
	if exp, got := a.Path, ws.Path; exp != got || ws.Missing {
		t.Fatalf("exp path %s (not missing), got %s (missing=%v)", exp, got, ws.Missing)
	}
}
