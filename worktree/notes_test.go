package worktree

import (
	"encoding/json"
	"fmt"
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

	raw := gitT(t, repo, "notes", "--ref", "patina-state", "show", ws.Anchor)
	var got map[string]any
	if err := json.Unmarshal([]byte(raw), &got); err != nil {
		t.Fatalf("state note is not JSON: %v\n%s", err, raw)
	}
	exp := map[string]any{
		"version":     float64(2),
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
	logText := gitT(t, repo, "notes", "--ref", "patina-log", "show", ws.Anchor)
	if !strings.Contains(logText, " created: branch patina/notes from refs/heads/main at "+ws.BaseCommit) {
		t.Fatalf("exp a created line in the log note, got %q", logText)
	}
}

// Two workspaces from one base have their own anchors, so their notes
// never mix.
func TestNotesPerWorkspace(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ctx := testCtx(t)
	a := mustCreate(t, r, CreateRequest{Name: "twin-a"})
	b := mustCreate(t, r, CreateRequest{Name: "twin-b"})
	if a.BaseCommit != b.BaseCommit || a.Anchor == b.Anchor {
		t.Fatalf("exp one base and two anchors, got %s/%s and %s/%s", a.BaseCommit, a.Anchor, b.BaseCommit, b.Anchor)
	}
	if err := r.AppendLog(ctx, "twin-a", Event{Kind: "only-a"}); err != nil {
		t.Fatal(err)
	}
	evs, err := r.Log(ctx, "twin-b")
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Kind == "only-a" {
			t.Fatalf("exp a's event only in a's log, got %+v in b's", evs)
		}
	}
	if exp, got := 2, len(strings.Split(gitT(t, repo, "notes", "--ref", "patina-state", "list"), "\n")); exp != got {
		t.Fatalf("exp %d state notes, got %d", exp, got)
	}
}

// A fresh Repo value (a restarted sidecar) finds every workspace again,
// with its metadata and log, from the notes alone.
func TestReloadFromNotes(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	state := t.TempDir()
	ctx := testCtx(t)
	r := openRepoState(t, repo, state)
	a := mustCreate(t, r, CreateRequest{Name: "alpha", Image: "i1"})
	mustCreate(t, r, CreateRequest{Name: "bravo", Base: "HEAD~1", Meta: json.RawMessage(`{"n":1}`)})
	in := newInside(t, a)
	tip := agentCommit(t, r, a, in, map[string]string{"work.txt": "work\n"})
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
	if exp, got := tip, newList[0].Head; exp != got {
		t.Fatalf("exp the recorded head %s, got %s", exp, got)
	}
	newLog, err := fresh.Log(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(oldLog, newLog) || len(newLog) != 3 {
		t.Fatalf("reloaded log differs:\nexp %+v\ngot %+v", oldLog, newLog)
	}
	// Another state dir (the CLI, say) lists the same.
	other, err := openRepo(t, repo).List(ctx)
	if err != nil || !reflect.DeepEqual(oldList, other) {
		t.Fatalf("exp the same list from another state dir, got %+v, %v", other, err)
	}
}

// Notes travel with repositories, and legacy workspaces could write them:
// a note must annotate the anchor of its own id (format 2) or a commit
// (legacy), be small, and say nothing that could become a path or ref.
func TestForgedNotesSkipped(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	good := mustCreate(t, r, CreateRequest{Name: "good"})
	head := gitT(t, repo, "rev-parse", "HEAD")
	blob := func(s string) string {
		out, err := gitTryIn(repo, s, "hash-object", "-w", "--stdin")
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	note := func(obj, content string) {
		t.Helper()
		if _, err := gitTryIn(repo, content, "notes", "--ref", "patina-state", "add", "-f", "-F", "-", obj); err != nil {
			t.Fatal(err)
		}
	}
	const id = "7d444840-9dc0-11d1-b245-5ffdce74fad2"
	v2 := func(name, base string) string {
		return fmt.Sprintf(`{"version":2,"id":%q,"name":%q,"base_commit":%q}`, id, name, base)
	}
	// Claims good's id from another object: not good's anchor.
	note(blob("decoy"), strings.Replace(v2("good2", head), id, good.ID, 1))
	// A format-2 note on an object that is not its id's anchor.
	note(blob("other"), v2("forged", head))
	// A legacy note on a blob.
	note(blob("legacy"), strings.Replace(v2("oldstyle", head), `"version":2`, `"version":1`, 1))
	// A path as a name, a ref that is an option, an unknown version.
	note(r.format.anchorID(id), v2("../../../etc", head))
	note(blob("x1"), fmt.Sprintf(`{"version":1,"id":%q,"name":"opt","base_ref":"--output=/tmp/x","base_commit":%q}`, id, head))
	note(blob("x2"), strings.Replace(v2("future", head), `"version":2`, `"version":3`, 1))
	// Too big to read.
	note(head, `{"version":1,"id":"`+id+`","name":"huge","base_commit":"`+head+`","meta":"`+strings.Repeat("x", maxStateNote)+`"}`)
	note(gitT(t, repo, "rev-parse", "HEAD~1"), "not json")

	list, err := r.List(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != good.ID || list[0].Name != "good" {
		t.Fatalf("exp only the good workspace, got %+v", list)
	}
}

// gitTryIn is gitTry with standard input.
func gitTryIn(dir, stdin string, args ...string) (string, error) {
	return gitTryEnvIn(dir, nil, stdin, args...)
}
