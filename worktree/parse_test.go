package worktree

import (
	"reflect"
	"testing"
)

func TestParseWorktreeList(t *testing.T) {
	t.Parallel()
	out := "worktree /r\x00HEAD 1111\x00branch refs/heads/main\x00\x00" +
		"worktree /s/w x\x00HEAD 2222\x00branch refs/heads/patina/x\x00prunable gitdir file points to non-existent location\x00\x00" +
		"worktree /s/d\x00HEAD 3333\x00detached\x00locked\x00\x00"
	exp := []worktreeEntry{
		{path: "/r", head: "1111", branch: "refs/heads/main"},
		{path: "/s/w x", head: "2222", branch: "refs/heads/patina/x", prunable: true},
		{path: "/s/d", head: "3333"},
	}
	if got := parseWorktreeList(out); !reflect.DeepEqual(exp, got) {
		t.Fatalf("exp %+v, got %+v", exp, got)
	}
	bare := parseWorktreeList("worktree /r.git\x00bare\x00\x00")
	if len(bare) != 1 || !bare[0].bare {
		t.Fatalf("exp one bare entry, got %+v", bare)
	}
}

func TestParseNotesList(t *testing.T) {
	t.Parallel()
	got := parseNotesList("aaaa1111 bbbb2222\ncccc3333 dddd4444\n\njunk line here\n")
	exp := map[string]string{"bbbb2222": "aaaa1111", "dddd4444": "cccc3333"}
	if !reflect.DeepEqual(exp, got) {
		t.Fatalf("exp %v, got %v", exp, got)
	}
}

func TestParseStatusZ(t *testing.T) {
	t.Parallel()
	out := " M a.txt\x00?? new dir/f\x00D  gone\x00UU conflict\x00A  staged\x00AM both\x00"
	got := parseStatusZ(out, false)
	exp := []string{"a.txt", "new dir/f", "gone", "conflict", "staged", "both"}
	if !reflect.DeepEqual(exp, got) {
		t.Fatalf("exp %q, got %q", exp, got)
	}
	got = parseStatusZ(out, true)
	exp = []string{"a.txt", "new dir/f", "conflict", "both"}
	if !reflect.DeepEqual(exp, got) {
		t.Fatalf("unstaged only: exp %q, got %q", exp, got)
	}
	if got := parseStatusZ("", false); len(got) != 0 {
		t.Fatalf("exp nothing, got %q", got)
	}
}

func TestParseMergeTreeZ(t *testing.T) {
	t.Parallel()
	tests := []struct {
		out       string
		tree      string
		conflicts []string
		ok        bool
	}{
		{"abcd1234\x00", "abcd1234", nil, true},
		{"abcd1234\x00b\x00a\x00a\x00\x00Auto-merging a\x00", "abcd1234", []string{"a", "b"}, true},
		{"", "", nil, false},
		{"not a tree\x00", "", nil, false},
	}
	for _, tc := range tests {
		tree, conflicts, err := parseMergeTreeZ(tc.out)
		if (err == nil) != tc.ok || tree != tc.tree || !reflect.DeepEqual(tc.conflicts, conflicts) {
			t.Errorf("parseMergeTreeZ(%q): exp %q %q ok=%v, got %q %q %v", tc.out, tc.tree, tc.conflicts, tc.ok, tree, conflicts, err)
		}
	}
}

func TestParseDiffOutputs(t *testing.T) {
	t.Parallel()
	files, err := parseNameStatusZ("M\x00a.txt\x00A\x00new\x00D\x00old\x00R097\x00from\x00to\x00T\x00link\x00C100\x00src\x00copy\x00")
	if err != nil {
		t.Fatal(err)
	}
	exp := []FileStat{
		{Path: "a.txt", Status: StatusModified},
		{Path: "new", Status: StatusAdded},
		{Path: "old", Status: StatusDeleted},
		{Path: "to", OldPath: "from", Status: StatusRenamed},
		{Path: "link", Status: StatusTypeChanged},
		{Path: "copy", OldPath: "src", Status: StatusCopied},
	}
	if !reflect.DeepEqual(exp, files) {
		t.Fatalf("exp %+v, got %+v", exp, files)
	}
	for _, bad := range []string{"X\x00a\x00", "M\x00", "R100\x00only\x00", "\x00\x00"} {
		if _, err := parseNameStatusZ(bad); err == nil {
			t.Errorf("parseNameStatusZ(%q): exp error", bad)
		}
	}

	stats, err := parseNumstatZ("1\t2\ta.txt\x00-\t-\tbin\x003\t0\t\x00from\x00to\x00")
	if err != nil {
		t.Fatal(err)
	}
	expStats := map[string]numstat{"a.txt": {1, 2, false}, "bin": {0, 0, true}, "to": {3, 0, false}}
	if !reflect.DeepEqual(expStats, stats) {
		t.Fatalf("exp %+v, got %+v", expStats, stats)
	}
	for _, bad := range []string{"x\ty\tz\x00", "1\t2\x00", "1\t2\t\x00from\x00"} {
		if _, err := parseNumstatZ(bad); err == nil {
			t.Errorf("parseNumstatZ(%q): exp error", bad)
		}
	}
}

func TestParseCatFileBatch(t *testing.T) {
	t.Parallel()
	got, err := parseCatFileBatch([]byte("aaaa blob 3\nabc\nbbbb missing\ncccc blob 0\n\n"))
	if err != nil {
		t.Fatal(err)
	}
	exp := map[string][]byte{"aaaa": []byte("abc"), "cccc": {}}
	if !reflect.DeepEqual(exp, got) {
		t.Fatalf("exp %q, got %q", exp, got)
	}
	for _, bad := range []string{"aaaa blob 10\nabc\n", "aaaa blob\n", "no newline"} {
		if _, err := parseCatFileBatch([]byte(bad)); err == nil {
			t.Errorf("parseCatFileBatch(%q): exp error", bad)
		}
	}
}

func TestOverlapping(t *testing.T) {
	t.Parallel()
	tests := []struct {
		touched, dirty, exp []string
	}{
		{[]string{"a.txt"}, []string{"b.txt"}, nil},
		{[]string{"a.txt"}, []string{"a.txt", "b.txt"}, []string{"a.txt"}},
		{[]string{"dir/new.txt"}, []string{"dir"}, []string{"dir"}},     // untracked file where a directory goes
		{[]string{"dir"}, []string{"dir/x", "dirx"}, []string{"dir/x"}}, // a file where a directory is
		{[]string{"src/a/b.txt"}, []string{"src/a.txt", "src"}, []string{"src"}},
		{nil, []string{"a"}, nil},
	}
	for _, tc := range tests {
		if got := overlapping(tc.touched, tc.dirty); !reflect.DeepEqual(tc.exp, got) {
			t.Errorf("overlapping(%q, %q): exp %q, got %q", tc.touched, tc.dirty, tc.exp, got)
		}
	}
}

// Git output is outside input: the parsers must never panic.
func FuzzParsers(f *testing.F) {
	for _, s := range []string{
		"worktree /r\x00HEAD 1\x00branch refs/heads/main\x00\x00",
		"M\x00a\x00R100\x00b\x00c\x00",
		"1\t2\ta\x00-\t-\t\x00b\x00c\x00",
		"abcd\x00x\x00\x00msg",
		"aaaa blob 3\nabc\n",
		" M a\x00?? b\x00",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		parseWorktreeList(s)
		parseNotesList(s)
		parseStatusZ(s, false)
		parseMergeTreeZ(s)
		parseNameStatusZ(s)
		parseNumstatZ(s)
		parseCatFileBatch([]byte(s))
		parseLog(s)
	})
}
