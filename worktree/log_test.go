package worktree

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestAppendLogAndLog(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ctx := testCtx(t)
	ws := mustCreate(t, r, CreateRequest{Name: "logs"})
	zero, one := 0, 1
	at := time.Date(2025, 11, 21, 5, 0, 0, 0, time.UTC)
	events := []Event{
		{Time: at, Kind: EventCommand, Message: "go test ./...", ExitCode: &zero},
		{Time: at, Kind: EventCommand, Message: "false", ExitCode: &one},
		{Time: at, Kind: "note", Message: "multi\nline\tmessage: with colon"},
		{Time: at, Kind: "bare"},
	}
	for _, ev := range events {
		if err := r.AppendLog(ctx, "logs", ev); err != nil {
			t.Fatal(err)
		}
	}
	err := r.AppendLog(ctx, "logs", Event{Kind: "Bad Kind"})
	wantErr(t, err, ErrInvalidName)

	text := gitT(t, repo, "notes", "--ref", "patina-log", "show", ws.Anchor)
	lines := strings.Split(text, "\n")
	expTail := []string{
		"2025-11-21T05:00:00Z command (exit 0): go test ./...",
		"2025-11-21T05:00:00Z command (exit 1): false",
		"2025-11-21T05:00:00Z note: multi line message: with colon",
		"2025-11-21T05:00:00Z bare",
	}
	if len(lines) != 5 || !reflect.DeepEqual(expTail, lines[1:]) {
		t.Fatalf("log note:\nexp created line + %q\ngot %q", expTail, lines)
	}

	got, err := r.Log(ctx, "logs")
	if err != nil {
		t.Fatal(err)
	}
	if exp := EventCreated; got[0].Kind != exp {
		t.Fatalf("exp first event %s, got %+v", exp, got[0])
	}
	events[2].Message = "multi line message: with colon"
	if !reflect.DeepEqual(events, got[1:]) {
		t.Fatalf("exp %+v, got %+v", events, got[1:])
	}
}

// Concurrent writers of one workspace's notes all land (note refs are
// updated read-modify-write, so patina serialises them).
func TestAppendLogConcurrent(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	state := t.TempDir()
	r1, r2 := openRepoState(t, repo, state), openRepoState(t, repo, state)
	mustCreate(t, r1, CreateRequest{Name: "busy"})
	const n = 20
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			r := r1
			if i%2 == 1 {
				r = r2
			}
			if i%5 == 0 {
				_, errs[i] = r.SetMeta(testCtx(t), "busy", json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)))
				return
			}
			errs[i] = r.AppendLog(testCtx(t), "busy", Event{Kind: EventCommand, Message: fmt.Sprintf("cmd %d", i)})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	events, err := r1.Log(testCtx(t), "busy")
	if err != nil {
		t.Fatal(err)
	}
	if exp, got := 1+n-n/5, len(events); exp != got {
		t.Fatalf("exp %d events, got %d", exp, got)
	}
}

func TestEventLineRoundTrip(t *testing.T) {
	t.Parallel()
	code := -1
	at := time.Date(2024, 2, 29, 23, 59, 59, 0, time.UTC)
	tests := []struct {
		ev   Event
		line string
	}{
		{Event{Time: at, Kind: "created", Message: "x"}, "2024-02-29T23:59:59Z created: x"},
		{Event{Time: at, Kind: "command", ExitCode: &code, Message: "kill -9 $$"}, "2024-02-29T23:59:59Z command (exit -1): kill -9 $$"},
		{Event{Time: at, Kind: "deleted"}, "2024-02-29T23:59:59Z deleted"},
		{Event{Time: at, Kind: "note", Message: "(exit 5): looks like a code"}, "2024-02-29T23:59:59Z note: (exit 5): looks like a code"},
	}
	for _, tc := range tests {
		if got := tc.ev.String(); got != tc.line {
			t.Errorf("String: exp %q, got %q", tc.line, got)
		}
		if got := parseEvent(tc.line); !reflect.DeepEqual(tc.ev, got) {
			t.Errorf("parseEvent(%q): exp %+v, got %+v", tc.line, tc.ev, got)
		}
	}
	if got := parseEvent("hand-written line"); got.Message != "hand-written line" || got.Kind != "" {
		t.Errorf("exp a foreign line kept as message, got %+v", got)
	}
	long := strings.Repeat("é", maxMessageLen)
	if got := oneLine(long); len(got) > maxMessageLen+len("…") || !strings.HasSuffix(got, "…") {
		t.Errorf("exp message cut to %d bytes, got %d", maxMessageLen, len(got))
	}
}

func FuzzEventRoundTrip(f *testing.F) {
	f.Add("command", "go test", 0, true)
	f.Add("note", "a: b (exit 1)", 0, false)
	f.Add("x", "\n\n", -3, true)
	f.Fuzz(func(t *testing.T, kind, msg string, code int, hasCode bool) {
		if validateKind(kind) != nil {
			return
		}
		ev := Event{Time: time.Unix(1700000000, 0).UTC(), Kind: kind, Message: msg}
		if hasCode {
			ev.ExitCode = &code
		}
		got := parseEvent(ev.String())
		ev.Message = oneLine(msg)
		if !reflect.DeepEqual(ev, got) {
			t.Fatalf("round trip: exp %+v, got %+v", ev, got)
		}
		if strings.Contains(ev.String(), "\n") {
			t.Fatalf("line contains a newline: %q", ev.String())
		}
	})
}

// Several events go into the note in one write, in order; a bad kind among
// them writes none.
func TestAppendLogBatch(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ctx := testCtx(t)
	mustCreate(t, r, CreateRequest{Name: "batch"})
	before, err := r.Log(ctx, "batch")
	if err != nil {
		t.Fatal(err)
	}
	code := 3
	batch := []Event{{Kind: EventCommand, Message: "a", ExitCode: &code}, {Kind: EventCommand, Message: "b"}, {Kind: "note", Message: "c"}}
	if err := r.AppendLog(ctx, "batch", batch...); err != nil {
		t.Fatal(err)
	}
	wantErr(t, r.AppendLog(ctx, "batch", Event{Kind: "ok"}, Event{Kind: "Bad Kind"}), ErrInvalidName)
	after, err := r.Log(ctx, "batch")
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before)+3 {
		t.Fatalf("exp %d events, got %d", len(before)+3, len(after))
	}
	got := after[len(before):]
	for i, exp := range []string{"a", "b", "c"} {
		if got[i].Message != exp {
			t.Fatalf("event %d: exp %q, got %q", i, exp, got[i].Message)
		}
	}
	if got[0].ExitCode == nil || *got[0].ExitCode != 3 {
		t.Fatalf("exit code lost: %+v", got[0])
	}
}

func TestTrimLogKeepsTheNewest(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 1000; i++ {
		fmt.Fprintf(&b, "2025-11-21T05:00:00Z command (exit 0): cmd %d\n", i)
	}
	text := b.String()
	if got := trimLog(text, len(text)); got != text {
		t.Fatal("exp a log within the bound unchanged")
	}
	got := trimLog(text, 8<<10)
	if len(got) > 8<<10 {
		t.Fatalf("exp at most 8 KiB, got %d", len(got))
	}
	evs := parseLog(got)
	if exp, got := "trimmed", evs[0].Kind; exp != got {
		t.Fatalf("exp the first line to say what was dropped (%q), got %q", exp, got)
	}
	if !strings.HasSuffix(got, "cmd 999\n") {
		t.Fatalf("exp the newest event kept, got %q", got[len(got)-40:])
	}
	if !strings.Contains(evs[0].Message, "earlier events dropped") {
		t.Fatalf("exp the count of dropped events, got %q", evs[0].Message)
	}
}
