package mcpserver

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestMCPCutOutput(t *testing.T) {
	lines := func(n int) []byte { // "line 000\n" ... 9 bytes each
		var b bytes.Buffer
		for i := range n {
			fmt.Fprintf(&b, "line %03d\n", i)
		}
		return b.Bytes()
	}
	all := lines(100) // 900 bytes
	for _, tc := range []struct {
		name             string
		prefix, suffix   []byte
		total            int64
		head, tail       int
		expHead, expTail string
		expFrom, expTo   int64
	}{
		{name: "short: all shown", prefix: []byte("hello\n"), total: 6, head: 4, tail: 4,
			expHead: "hello\n", expFrom: 6, expTo: 6},
		{name: "empty", total: 0, head: 4, tail: 4, expFrom: 0, expTo: 0},
		{name: "exactly head+tail", prefix: []byte("abcdefgh"), total: 8, head: 4, tail: 4,
			expHead: "abcdefgh", expFrom: 8, expTo: 8},
		{name: "no newlines: byte cuts", prefix: []byte("abcdefghij"), total: 10, head: 4, tail: 4,
			expHead: "abcd", expTail: "ghij", expFrom: 4, expTo: 6},
		{name: "cuts move to line breaks", prefix: all, total: 900, head: 100, tail: 100,
			// 100 bytes is 11 lines and 1 byte: back to the end of line 10.
			expHead: string(all[:99]), expTail: string(all[801:]), expFrom: 99, expTo: 801},
		{name: "sidecar truncated: head and tail known", prefix: all[:300], suffix: all[600:], total: 900, head: 100, tail: 100,
			expHead: string(all[:99]), expTail: string(all[801:]), expFrom: 99, expTo: 801},
		{name: "sidecar kept less than asked", prefix: all[:45], suffix: all[855:], total: 900, head: 100, tail: 100,
			expHead: string(all[:45]), expTail: string(all[855:]), expFrom: 45, expTo: 855},
		{name: "zero budget", prefix: []byte("abc"), total: 3, head: 0, tail: 0,
			expFrom: 0, expTo: 3},
		{name: "head only", prefix: []byte("abcdefgh"), total: 8, head: 3, tail: 0,
			expHead: "abc", expFrom: 3, expTo: 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := cutOutput(tc.prefix, tc.suffix, tc.total, tc.head, tc.tail)
			if string(e.Head) != tc.expHead || string(e.Tail) != tc.expTail || e.From != tc.expFrom || e.To != tc.expTo {
				t.Fatalf("exp head %q tail %q omitted [%d,%d), got head %q tail %q omitted [%d,%d)",
					tc.expHead, tc.expTail, tc.expFrom, tc.expTo, e.Head, e.Tail, e.From, e.To)
			}
		})
	}
}

func TestMCPCutOutputKeepsRunes(t *testing.T) {
	s := []byte(strings.Repeat("é", 50)) // 2 bytes each, no newlines
	for head := range 10 {
		for tail := range 10 {
			e := cutOutput(s, nil, int64(len(s)), head, tail)
			if !utf8.Valid(e.Head) || !utf8.Valid(e.Tail) {
				t.Fatalf("head %d tail %d: split a character: %q %q", head, tail, e.Head, e.Tail)
			}
			if int64(len(e.Head)) != e.From || int64(len(s))-int64(len(e.Tail)) != e.To {
				t.Fatalf("head %d tail %d: offsets %d %d do not match %d+%d bytes", head, tail, e.From, e.To, len(e.Head), len(e.Tail))
			}
		}
	}
}

// Whatever the budgets, head + omitted + tail is the stream.
func TestMCPCutOutputAccounts(t *testing.T) {
	data := []byte(strings.Repeat("ab\ncdé\n", 200))
	total := int64(len(data))
	for _, known := range []int{len(data), 100, 500} {
		prefix, suffix := data, []byte(nil)
		if known < len(data) {
			prefix, suffix = data[:known], data[len(data)-known:]
		}
		for _, budget := range []int{0, 1, 7, 64, 300, 2000} {
			e := cutOutput(prefix, suffix, total, budget, budget)
			if got := int64(len(e.Head)) + e.Omitted() + int64(len(e.Tail)); got != total {
				t.Fatalf("known %d budget %d: head %d + omitted %d + tail %d = %d, exp %d", known, budget, len(e.Head), e.Omitted(), len(e.Tail), got, total)
			}
			if !bytes.Equal(e.Head, data[:e.From]) || !bytes.Equal(e.Tail, data[e.To:]) {
				t.Fatalf("known %d budget %d: head/tail are not the stream's bytes at [0,%d) and [%d,%d)", known, budget, e.From, e.To, total)
			}
			if len(e.Head) > budget || len(e.Tail) > budget {
				t.Fatalf("known %d budget %d: over budget: %d %d", known, budget, len(e.Head), len(e.Tail))
			}
		}
	}
}

func TestMCPRender(t *testing.T) {
	more := func(off int64) string { return fmt.Sprintf("read from %d", off) }
	t.Run("nothing omitted", func(t *testing.T) {
		text, bad := excerpt{Head: []byte("a\nb\n"), From: 4, To: 4}.render(more)
		if text != "a\nb\n" || bad {
			t.Fatalf("got %q %v", text, bad)
		}
	})
	t.Run("marker", func(t *testing.T) {
		text, _ := excerpt{Head: []byte("head"), Tail: []byte("tail\n"), From: 4, To: 104}.render(more)
		exp := "head\n[... 100 bytes omitted (bytes 4 to 104); read from 4 ...]\ntail\n"
		if text != exp {
			t.Fatalf("exp %q, got %q", exp, text)
		}
	})
	t.Run("invalid UTF-8", func(t *testing.T) {
		text, bad := excerpt{Head: []byte("a\xffb"), From: 3, To: 3}.render(more)
		if text != "a\uFFFDb" || !bad {
			t.Fatalf("got %q %v", text, bad)
		}
	})
}

func TestMCPCutRuneEnd(t *testing.T) {
	for _, tc := range []struct{ in, exp string }{
		{"", ""},
		{"abc", "abc"},
		{"aé", "aé"},
		{"a\xc3", "a"},          // first byte of é
		{"a\xe2\x82", "a"},      // two of €'s three bytes
		{"a\xe2\x82\xac", "a€"}, // all of €
		{"a\xff", "a\xff"},      // invalid anyway: kept
		{"\x80\x80\x80\x80", "\x80\x80\x80\x80"},
	} {
		if got := string(cutRuneEnd([]byte(tc.in))); got != tc.exp {
			t.Errorf("cutRuneEnd(%q): exp %q, got %q", tc.in, tc.exp, got)
		}
	}
}

func FuzzCutOutput(f *testing.F) {
	f.Add([]byte("line 1\nline 2\nline 3\n"), 200, 5, 5)
	f.Add([]byte("ééééé\n\xff\xfe"), 3, 2, 3)
	f.Fuzz(func(t *testing.T, data []byte, known, head, tail int) {
		if head < 0 || tail < 0 || head > 1<<16 || tail > 1<<16 {
			return
		}
		total := int64(len(data))
		prefix, suffix := data, []byte(nil)
		if known >= 0 && known < len(data) {
			prefix, suffix = data[:known], data[len(data)-known:]
		}
		e := cutOutput(prefix, suffix, total, head, tail)
		if e.From > e.To || !bytes.Equal(e.Head, data[:e.From]) || !bytes.Equal(e.Tail, data[e.To:]) {
			t.Fatalf("head [0,%d) and tail [%d,%d) are not the stream's bytes", e.From, e.To, total)
		}
		if len(e.Head) > head || len(e.Tail) > tail {
			if e.Omitted() > 0 {
				t.Fatalf("over budget: %d %d for %d %d", len(e.Head), len(e.Tail), head, tail)
			}
		}
	})
}
