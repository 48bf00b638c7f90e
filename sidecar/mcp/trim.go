package mcpserver

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"
)

// excerpt is what a tool shows of one output stream: its first and last
// bytes, and the byte range [From, To) between them that it leaves out
// (From == To when nothing is left out).
type excerpt struct {
	Head, Tail []byte
	From, To   int64
}

// Omitted is the number of bytes left out.
func (e excerpt) Omitted() int64 { return e.To - e.From }

// cutOutput chooses what to show of a stream of total bytes, of which the
// caller knows the first bytes (prefix, from offset 0) and the last bytes
// (suffix, ending at total; ignored when prefix holds the whole stream). It
// keeps at most headMax bytes from the start and tailMax from the end. A
// cut moves to a line break when one is near (within a quarter of the
// budget, at most 2 KiB), and never splits a UTF-8 sequence.
func cutOutput(prefix, suffix []byte, total int64, headMax, tailMax int) excerpt {
	headMax, tailMax = max(headMax, 0), max(tailMax, 0)
	if int64(len(prefix)) >= total {
		prefix = prefix[:total]
		if len(prefix) <= headMax+tailMax {
			return excerpt{Head: prefix, From: total, To: total}
		}
		suffix = prefix
	}
	if int64(len(suffix)) > total {
		suffix = suffix[int64(len(suffix))-total:]
	}

	// The head: up to headMax bytes of the prefix, ending after a newline
	// when one is near the cut.
	h := min(headMax, len(prefix))
	if h < len(prefix) {
		if i := bytes.LastIndexByte(prefix[h-snapWindow(headMax):h], '\n'); i >= 0 {
			h = h - snapWindow(headMax) + i + 1
		} else {
			for k := 0; k < utf8.UTFMax-1 && h > 0 && !utf8.RuneStart(prefix[h]); k++ {
				h--
			}
		}
	}

	// The tail: up to tailMax bytes of the suffix, starting after a newline
	// when one is near the cut.
	t := len(suffix) - min(tailMax, len(suffix)) // index in suffix
	if t > 0 {
		if i := bytes.IndexByte(suffix[t:t+snapWindow(tailMax)], '\n'); i >= 0 {
			t += i + 1
		} else {
			for k := 0; k < utf8.UTFMax-1 && t < len(suffix) && !utf8.RuneStart(suffix[t]); k++ {
				t++
			}
		}
	}
	suffixStart := total - int64(len(suffix))
	from, to := int64(h), suffixStart+int64(t)
	if to < from { // the tail overlaps the head
		t += int(from - to)
		to = from
	}
	return excerpt{Head: prefix[:h], Tail: suffix[t:], From: from, To: to}
}

// snapWindow is how far a cut may move to reach a line break.
func snapWindow(budget int) int { return min(budget/4, 2048) }

// asText returns b as text, with invalid UTF-8 replaced by U+FFFD, and
// whether there was any.
func asText(b []byte) (string, bool) {
	if utf8.Valid(b) {
		return string(b), false
	}
	return strings.ToValidUTF8(string(b), "\uFFFD"), true
}

// render joins an excerpt into the text a model reads, with a marker where
// bytes were left out. more tells how to read them, given their offset.
func (e excerpt) render(more func(offset int64) string) (text string, invalidUTF8 bool) {
	head, badHead := asText(e.Head)
	if e.Omitted() == 0 {
		return head, badHead
	}
	tail, badTail := asText(e.Tail)
	var b strings.Builder
	b.WriteString(head)
	if head != "" && !strings.HasSuffix(head, "\n") {
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "[... %d bytes omitted (bytes %d to %d); %s ...]\n", e.Omitted(), e.From, e.To, more(e.From))
	b.WriteString(tail)
	return b.String(), badHead || badTail
}

// cutRuneEnd shortens b so that it does not end inside a UTF-8 sequence
// (unless the sequence is invalid anyway), for reading output in chunks.
func cutRuneEnd(b []byte) []byte {
	for k := 1; k < utf8.UTFMax && k <= len(b); k++ {
		c := b[len(b)-k]
		if !utf8.RuneStart(c) {
			continue
		}
		// c starts a sequence k bytes from the end: keep it if complete.
		if utf8.FullRune(b[len(b)-k:]) {
			return b
		}
		return b[:len(b)-k]
	}
	return b
}
