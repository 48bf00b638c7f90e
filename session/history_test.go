package session

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A long-lived session's history keeps only its newest commands in memory;
// paging, lookups and a reopen still see every command, with its text
// (long ones included) and its end.
func TestHistoryBoundedInMemory(t *testing.T) {
	path := filepath.Join(t.TempDir(), histFile)
	h, err := openHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	const n = 5*historyWindow + 37
	text := func(i int) string {
		if i%97 == 0 {
			return fmt.Sprintf("echo %d %s", i, strings.Repeat("x", historyInline+i))
		}
		return fmt.Sprintf("echo %d", i)
	}
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	for i := 1; i <= n; i++ {
		id := strconv.Itoa(i)
		start := t0.Add(time.Duration(i) * time.Second)
		if err := h.start(CommandInfo{ID: id, Command: text(i), State: CommandRunning, StartedAt: start}); err != nil {
			t.Fatal(err)
		}
		if i == n {
			break // the newest is still running
		}
		if err := h.end(CommandInfo{ID: id, State: CommandFinished, StartedAt: start, EndedAt: timePtr(start.Add(time.Millisecond)),
			ExitCode: intPtr(i % 256), StdoutBytes: int64(i), TimedOut: i%5 == 0}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(h *history, what string) {
		t.Helper()
		if len(h.win) > 2*historyWindow || len(h.sparse) == 0 || len(h.sparse) > n/historySparse+1 {
			t.Fatalf("%s: %d commands in memory, %d marks", what, len(h.win), len(h.sparse))
		}
		if h.len() != n || h.newest() != n || h.lastExit() != (n-1)%256 {
			t.Fatalf("%s: len %d newest %d last exit %d", what, h.len(), h.newest(), h.lastExit())
		}
		all := h.all()
		if len(all) != n {
			t.Fatalf("%s: all() has %d commands", what, len(all))
		}
		for i, ci := range all {
			id := i + 1
			if ci.ID != strconv.Itoa(id) || ci.Command != text(id) || !ci.StartedAt.Equal(t0.Add(time.Duration(id)*time.Second)) {
				t.Fatalf("%s: command %d: %+v", what, id, ci)
			}
			if id == n {
				if ci.State != CommandRunning || ci.ExitCode != nil {
					t.Fatalf("%s: the running command: %+v", what, ci)
				}
				continue
			}
			if ci.State != CommandFinished || ci.ExitCode == nil || *ci.ExitCode != id%256 || ci.StdoutBytes != int64(id) || ci.TimedOut != (id%5 == 0) || ci.EndedAt == nil {
				t.Fatalf("%s: command %d: %+v", what, id, ci)
			}
		}
		// Pages of 7 from anywhere, across the file and the window.
		for _, after := range []uint64{0, 1, 300, 255, 511, uint64(n - 600), uint64(n - 3), uint64(n)} {
			pg := h.page(after, 7, 0)
			want := min(7, n-int(after))
			if len(pg) != want {
				t.Fatalf("%s: page after %d: %d commands, want %d", what, after, len(pg), want)
			}
			for i, ci := range pg {
				if ci.ID != strconv.Itoa(int(after)+1+i) || ci.Command != text(int(after)+1+i) {
					t.Fatalf("%s: page after %d, #%d: %+v", what, after, i, ci)
				}
			}
		}
		for _, after := range []uint64{n + 5, 1<<64 - 1} {
			if pg := h.page(after, 7, 0); len(pg) != 0 {
				t.Fatalf("%s: page after %d: %d commands", what, after, len(pg))
			}
		}
		// The byte bound holds from the second command on.
		if pg := h.page(96, 100, 600); len(pg) != 1 || pg[0].ID != "97" {
			t.Fatalf("%s: a page of long texts: %d commands", what, len(pg))
		}
		for _, id := range []string{"1", "97", "500", strconv.Itoa(n)} {
			if ci, ok := h.get(id); !ok || ci.ID != id || ci.Command != text(idOfString(id)) {
				t.Fatalf("%s: get %s: %+v %v", what, id, ci, ok)
			}
		}
		for _, id := range []string{"0", "01", "-1", "x", strconv.Itoa(n + 1), "99999999999999999999"} {
			if _, ok := h.get(id); ok {
				t.Fatalf("%s: get %q found something", what, id)
			}
		}
	}
	check(h, "written")
	h.close()
	h2, err := openHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	defer h2.close()
	check(h2, "reopened")
}

func idOfString(id string) int {
	n, _ := strconv.Atoi(id)
	return n
}

// history.jsonl lives in the workspace, which may rewrite it: junk lines,
// ids out of order or not numbers, a line over the bound, the file cut
// short or replaced while open. The history loads what it can, pages end,
// and nothing panics.
func TestHistoryTamperedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), histFile)
	var b strings.Builder
	for i := 1; i <= 3*historyWindow; i++ {
		fmt.Fprintf(&b, `{"t":"start","id":"%d","command":"c%d","state":"running","started_at":"2026-11-23T12:00:00Z"}`+"\n", i, i)
		switch i % 7 {
		case 0:
			b.WriteString("not json\n")
		case 1:
			fmt.Fprintf(&b, `{"t":"start","id":"%d","command":"again"}`+"\n", i-1) // an id going back
		case 2:
			b.WriteString(`{"t":"end","id":"x","state":"weird"}` + "\n")
		case 3:
			fmt.Fprintf(&b, `{"t":"end","id":"%d","state":"weird","exit_code":-5}`+"\n", i)
		}
	}
	b.WriteString(`{"t":"start","id":"99999","command":"` + strings.Repeat("y", historyMaxLine) + `"}` + "\n")
	b.WriteString(`{"t":"start","id":"100000","command":"after the huge line"}` + "\n")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := openHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	defer h.close()
	all := h.all()
	if len(all) == 0 || all[0].ID != "1" || all[len(all)-1].Command != "after the huge line" {
		t.Fatalf("loaded %d commands, first %+v", len(all), all)
	}
	for i := 1; i < len(all); i++ {
		if idOf(all[i]) <= idOf(all[i-1]) {
			t.Fatalf("ids not increasing at %d: %s after %s", i, all[i].ID, all[i-1].ID)
		}
	}
	for _, ci := range all {
		if ci.State == "weird" {
			t.Fatalf("a state the history does not know came through: %+v", ci)
		}
	}
	// Cut short, then replaced by junk, while open.
	if err := os.Truncate(path, 100); err != nil {
		t.Fatal(err)
	}
	_ = h.page(0, 50, 0)
	_, _ = h.get("3")
	if err := os.WriteFile(path, []byte("junk\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if pg := h.page(0, 10, 0); len(pg) > 10 {
		t.Fatalf("page of 10: %d", len(pg))
	}
	if err := h.start(CommandInfo{ID: strconv.FormatUint(h.newest()+1, 10), Command: "next"}); err != nil {
		t.Fatal(err)
	}
}
