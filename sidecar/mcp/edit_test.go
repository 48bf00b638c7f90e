package mcpserver

import (
	"errors"
	"strings"
	"testing"
)

func TestMCPApplyEdit(t *testing.T) {
	const file = "package main\n\nfunc a() {\n\treturn 1\n}\n\nfunc b() {\n\treturn 1\n}\n"
	for _, tc := range []struct {
		name            string
		content         string
		search, replace string
		which           int
		exp             string
		expMatch        int
		expMatches      int
		expLine         int
		expErr          error    // errors.Is, when set
		expMsg          []string // parts of the error message
	}{
		{name: "unique", content: file, search: "func a() {\n\treturn 1", replace: "func a() {\n\treturn 2",
			exp: strings.Replace(file, "return 1", "return 2", 1), expMatch: 1, expMatches: 1, expLine: 3},
		{name: "delete", content: "a\nb\nc\n", search: "b\n", replace: "", exp: "a\nc\n", expMatch: 1, expMatches: 1, expLine: 2},
		{name: "ambiguous", content: file, search: "\treturn 1\n", replace: "\treturn 2\n",
			expErr: errAmbiguous, expMsg: []string{"2 times", "lines 4, 8", "which_match (1 to 2)"}},
		{name: "which_match picks the second", content: file, search: "\treturn 1\n", replace: "\treturn 2\n", which: 2,
			exp: "package main\n\nfunc a() {\n\treturn 1\n}\n\nfunc b() {\n\treturn 2\n}\n", expMatch: 2, expMatches: 2, expLine: 8},
		{name: "which_match on a unique match", content: file, search: "func b", replace: "func c", which: 1,
			exp: strings.Replace(file, "func b", "func c", 1), expMatch: 1, expMatches: 1, expLine: 7},
		{name: "which_match too large", content: file, search: "return 1", replace: "return 2", which: 3,
			expMsg: []string{"which_match is 3", "occurs 2 times", "lines 4, 8"}},
		{name: "not found", content: file, search: "return 3", replace: "return 4",
			expErr: errNoMatch, expMsg: []string{"exactly"}},
		{name: "not found: indentation differs", content: file, search: "func a() {\n    return 1\n}", replace: "x",
			expErr: errNoMatch, expMsg: []string{"apart from indentation", "line 3"}},
		{name: "not found: CRLF file", content: "one\r\ntwo\r\nthree\r\n", search: "two\nthree", replace: "2\n3",
			expErr: errNoMatch, expMsg: []string{"CRLF", "line 2"}},
		{name: "non-overlapping count", content: "aaaa", search: "aa", replace: "b", which: 2,
			exp: "aab", expMatch: 2, expMatches: 2, expLine: 1},
		{name: "empty search", content: file, search: "", replace: "x", expMsg: []string{"must not be empty", "file_write"}},
		{name: "no-op", content: file, search: "func a", replace: "func a", expMsg: []string{"identical"}},
		{name: "negative which", content: file, search: "func a", replace: "func z", which: -1, expMsg: []string{"1 or more"}},
		{name: "many matches are summarised", content: strings.Repeat("x\n", 15), search: "x", replace: "y",
			expErr: errAmbiguous, expMsg: []string{"15 times", "and 5 more"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := applyEdit(tc.content, tc.search, tc.replace, tc.which)
			if tc.expErr != nil || tc.expMsg != nil {
				if err == nil {
					t.Fatalf("exp an error, got %+v", e)
				}
				if tc.expErr != nil && !errors.Is(err, tc.expErr) {
					t.Fatalf("exp %v, got %v", tc.expErr, err)
				}
				for _, m := range tc.expMsg {
					if !strings.Contains(err.Error(), m) {
						t.Fatalf("exp %q in the error, got %q", m, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("exp no error, got %v", err)
			}
			if e.Content != tc.exp || e.Match != tc.expMatch || e.Matches != tc.expMatches || e.Line != tc.expLine {
				t.Fatalf("exp %q match %d of %d at line %d, got %q match %d of %d at line %d",
					tc.exp, tc.expMatch, tc.expMatches, tc.expLine, e.Content, e.Match, e.Matches, e.Line)
			}
		})
	}
}

func FuzzApplyEdit(f *testing.F) {
	f.Add("a\nb\na\n", "a", "c", 0)
	f.Add("aaaa", "aa", "", 2)
	f.Fuzz(func(t *testing.T, content, search, replace string, which int) {
		e, err := applyEdit(content, search, replace, which)
		if err != nil {
			return
		}
		at := occurrences(content, search)
		i := at[e.Match-1]
		if e.Content != content[:i]+replace+content[i+len(search):] {
			t.Fatalf("the edit is not one replacement at %d", i)
		}
		if e.Matches != len(at) || (which > 0 && e.Match != which) || (which == 0 && len(at) != 1) {
			t.Fatalf("match %d of %d for which %d, occurrences %v", e.Match, e.Matches, which, at)
		}
	})
}
