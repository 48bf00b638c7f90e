package daggerws

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTrimMiddle(t *testing.T) {
	lines := func(n int) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(strings.Repeat(string(rune('a'+i%26)), 9) + "\n")
		}
		return b.String()
	}
	for _, tc := range []struct {
		name       string
		in         string
		head, tail int
		exp        string
	}{
		{"short", "abc", 2, 2, "abc"},
		{"exactly the limit", "abcd", 2, 2, "abcd"},
		{"no lines", "abcdefghij", 2, 3, "ab\n[... 5 bytes omitted ...]\nhij"},
		{"tail only", "abcdefghij", 0, 3, "[... 7 bytes omitted ...]\nhij"},
		{"cut at lines", lines(10), 25, 25,
			"aaaaaaaaa\nbbbbbbbbb\n[... 60 bytes omitted ...]\niiiiiiiii\njjjjjjjjj\n"},
		{"no split character", "ééééé", 3, 3, "é\n[... 6 bytes omitted ...]\né"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := trimMiddle(tc.in, tc.head, tc.tail)
			if got != tc.exp {
				t.Errorf("exp %q, got %q", tc.exp, got)
			}
			if !utf8.ValidString(got) {
				t.Errorf("exp valid UTF-8, got %q", got)
			}
		})
	}
}

func TestOneLine(t *testing.T) {
	for _, tc := range []struct {
		in  string
		max int
		exp string
	}{
		{"go test ./...", 50, "go test ./..."},
		{"a\n\tb  c\n", 50, "a b c"},
		{"abcdefghij", 8, "abcde..."},
		{"ééééé", 8, "éé..."},
	} {
		if got := oneLine(tc.in, tc.max); got != tc.exp {
			t.Errorf("oneLine(%q, %d): exp %q, got %q", tc.in, tc.max, tc.exp, got)
		}
	}
}
