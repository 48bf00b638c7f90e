package lines

import (
	"slices"
	"strings"
	"testing"
)

// Lines split across writes come whole, "\r\n" as "\n"; an unfinished
// line waits; an endless one is bounded.
func TestFeed(t *testing.T) {
	var s Splitter
	var got []string
	add := func(l string) { got = append(got, l) }
	for _, piece := range []string{"one\r\ntw", "o\n", "", "three", "\nfour"} {
		s.Feed([]byte(piece), add)
	}
	if !slices.Equal(got, []string{"one", "two", "three"}) {
		t.Fatalf("got %q", got)
	}
	s.Flush(add)
	s.Flush(add)
	if !slices.Equal(got, []string{"one", "two", "three", "four"}) {
		t.Fatalf("exp the unfinished line once on Flush, got %q", got)
	}
	got = nil
	s.Feed([]byte(strings.Repeat("x", 2*MaxPartial)), add)
	s.Feed([]byte("\n"), add)
	if len(got) != 1 || len(got[0]) > MaxPartial {
		t.Fatalf("exp one bounded line, got %d lines of %d bytes", len(got), len(got[0]))
	}
}
