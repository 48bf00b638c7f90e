// Package lines splits a stream written in pieces into its lines, for
// progress displays that show output line by line.
package lines

import (
	"bytes"
	"strings"
)

// MaxPartial bounds a line held while its end has not arrived: what comes
// beyond it is dropped from that line.
const MaxPartial = 64 << 10

// Splitter holds the unfinished end of what was fed.
type Splitter struct {
	partial []byte
}

// Feed calls fn with each line that b completes (without its "\n" and a
// "\r" before it), in order, and keeps the unfinished rest.
func (s *Splitter) Feed(b []byte, fn func(line string)) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if len(s.partial)+len(b) <= MaxPartial {
				s.partial = append(s.partial, b...)
			}
			return
		}
		line := string(append(s.partial, b[:i]...))
		s.partial = s.partial[:0]
		b = b[i+1:]
		fn(strings.TrimRight(line, "\r"))
	}
}

// Flush calls fn with the unfinished line, if there is one, and forgets it.
func (s *Splitter) Flush(fn func(line string)) {
	if len(s.partial) > 0 {
		line := strings.TrimRight(string(s.partial), "\r")
		s.partial = s.partial[:0]
		fn(line)
	}
}
