package worktree

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

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
func TestParseSmallFormats(t *testing.T) {
	t.Parallel()
	if got, err := parseIndexPackOutput("pack\t" + strings.Repeat("a", 40) + "\n"); err != nil || got != strings.Repeat("a", 40) {
		t.Errorf("index-pack output: got %q, %v", got, err)
	}
	for _, bad := range []string{"", "pack\tzz", "pack " + strings.Repeat("a", 40), "junk\t" + strings.Repeat("a", 40)} {
		if _, err := parseIndexPackOutput(bad); err == nil {
			t.Errorf("exp %q refused", bad)
		}
	}
	if exp, got := map[string]string{"aaaa": "commit", "bbbb": "blob"}, parseBatchCheck("aaaa commit\nbbbb blob\ncccc missing\njunk\n"); !reflect.DeepEqual(exp, got) {
		t.Errorf("batch-check: exp %v, got %v", exp, got)
	}
	if got, err := parseGitdirFile([]byte("/s/w x/.git\n")); err != nil || got != "/s/w x" {
		t.Errorf("gitdir: got %q, %v", got, err)
	}
	for _, bad := range []string{"relative/.git", "/no/dotgit", "", "/a/.git\n/b/.git"} {
		if _, err := parseGitdirFile([]byte(bad)); err == nil {
			t.Errorf("exp gitdir %q refused", bad)
		}
	}
	for in, exp := range map[string]string{"ref: refs/heads/main\n": "refs/heads/main", strings.Repeat("a", 40) + "\n": ""} {
		if got, err := parseHEADFile([]byte(in)); err != nil || got != exp {
			t.Errorf("HEAD %q: exp %q, got %q, %v", in, exp, got, err)
		}
	}
	for _, bad := range []string{"ref: HEAD", "ref: refs/heads/../x", "ref: refs/heads/-x y", "junk"} {
		if _, err := parseHEADFile([]byte(bad)); err == nil {
			t.Errorf("exp HEAD %q refused", bad)
		}
	}
	if got, err := parseDotGitFile([]byte("gitdir: /r/.git/worktrees/x\n")); err != nil || got != "/r/.git/worktrees/x" {
		t.Errorf(".git file: got %q, %v", got, err)
	}
	if exp, got := []string{"/a/objects", "rel/objects", "/quoted\tpath"}, parseAlternates("/a/objects\n# comment\n\nrel/objects\r\n\"/quoted\\tpath\"\n\"bad quote\n"); !reflect.DeepEqual(exp, got) {
		t.Errorf("alternates: exp %q, got %q", exp, got)
	}
	pack := append([]byte("PACK\x00\x00\x00\x02\x00\x00\x01\x00"), 0)
	if n, err := parsePackHeader(pack); err != nil || n != 256 {
		t.Errorf("pack header: got %d, %v", n, err)
	}
	if _, err := parsePackHeader([]byte("PACK\x00\x00\x00\x09\x00\x00\x00\x01")); err == nil {
		t.Errorf("exp pack version 9 refused")
	}
}

func TestReadNameStatusZBounded(t *testing.T) {
	t.Parallel()
	out := "M\x00a\x00A\x00b\x00R100\x00c\x00d\x00D\x00e\x00"
	files, more, err := readNameStatusZ(strings.NewReader(out), 2)
	if err != nil || !more || len(files) != 2 || files[1].Path != "b" {
		t.Fatalf("exp the first 2 and more, got %+v, %v, %v", files, more, err)
	}
	files, more, err = readNameStatusZ(strings.NewReader(out), 4)
	if err != nil || more || len(files) != 4 || files[2].OldPath != "c" {
		t.Fatalf("exp all 4, got %+v, %v, %v", files, more, err)
	}
	long := "A\x00" + strings.Repeat("p", maxZField+1) + "\x00"
	if _, _, err := readNameStatusZ(strings.NewReader(long), 10); err == nil {
		t.Fatalf("exp a path over the field limit refused")
	}
}

func FuzzParsers(f *testing.F) {
	for _, s := range []string{
		"M\x00a\x00R100\x00b\x00c\x00",
		"1\t2\ta\x00-\t-\t\x00b\x00c\x00",
		"abcd\x00x\x00\x00msg",
		"aaaa blob 3\nabc\n",
		" M a\x00?? b\x00",
		"pack\t" + strings.Repeat("a", 40) + "\n",
		"ref: refs/heads/main\n",
		"gitdir: /r/.git/worktrees/x\n",
		"/a/objects\n\"/b\\n\"\n",
		"PACK\x00\x00\x00\x02\x00\x00\x00\x01",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		parseNotesList(s)
		parseStatusZ(s, false)
		parseMergeTreeZ(s)
		parseNameStatusZ(s)
		readNameStatusZ(strings.NewReader(s), 3)
		parseNumstatZ(s)
		readNumstatZ(strings.NewReader(s), 3)
		parseCatFileBatch([]byte(s))
		parseBatchCheck(s)
		parseIndexPackOutput(s)
		parseLog(s)
		parseAlternates(s)
		parsePackHeader([]byte(s))
		if dir, err := parseGitdirFile([]byte(s)); err == nil && (!filepath.IsAbs(dir) || strings.ContainsAny(dir, "\x00\n")) {
			t.Fatalf("gitdir %q accepted as %q", s, dir)
		}
		if ref, err := parseHEADFile([]byte(s)); err == nil && ref != "" && !strings.HasPrefix(ref, "refs/") {
			t.Fatalf("HEAD %q accepted as %q", s, ref)
		}
		parseDotGitFile([]byte(s))
	})
}

// State notes are outside input: whatever parses is safe to use as a name,
// id, base commit and ref.
func FuzzParseState(f *testing.F) {
	f.Add([]byte(`{"version":2,"id":"7d444840-9dc0-11d1-b245-5ffdce74fad2","name":"ok","base_ref":"refs/heads/main","base_commit":"` + strings.Repeat("a", 40) + `"}`))
	f.Add([]byte(`{"version":1,"id":"x","name":"../x"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := parseState(b)
		if err != nil {
			return
		}
		if ValidateName(st.Name) != nil || !isUUID(st.ID) || !isHex(st.BaseCommit) || st.Branch != BranchPrefix+st.Name {
			t.Fatalf("accepted %+v", st)
		}
		if st.BaseRef != "" {
			if _, err := validateRef(st.BaseRef); err != nil {
				t.Fatalf("accepted base ref %q", st.BaseRef)
			}
		}
	})
}
