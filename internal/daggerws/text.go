package daggerws

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// trimMiddle returns s, or when it is longer than head+tail bytes, its first
// head and last tail bytes joined by a line saying how much was left out.
// Cuts fall on line ends when one is near, and never inside a UTF-8
// character.
func trimMiddle(s string, head, tail int) string {
	if len(s) <= head+tail {
		return s
	}
	h := s[:runeStart(s, head)]
	if i := strings.LastIndexByte(h, '\n'); i >= 0 && i >= len(h)/2 {
		h = h[:i+1]
	}
	t := s[nextRuneStart(s, len(s)-tail):]
	if i := strings.IndexByte(t, '\n'); i >= 0 && i < len(t)/2 && i+1 < len(t) {
		t = t[i+1:]
	}
	omitted := len(s) - len(h) - len(t)
	sep := ""
	if h != "" && !strings.HasSuffix(h, "\n") {
		sep = "\n"
	}
	return fmt.Sprintf("%s%s[... %d bytes omitted ...]\n%s", h, sep, omitted, t)
}

// runeStart moves i back to the start of the UTF-8 character holding it.
func runeStart(s string, i int) int {
	for i > 0 && i < len(s) && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}

// nextRuneStart moves i forward to the start of a UTF-8 character.
func nextRuneStart(s string, i int) int {
	for i > 0 && i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return i
}

// oneLine flattens s to one line of at most max bytes.
func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		s = s[:runeStart(s, max-3)] + "..."
	}
	return s
}

// short abbreviates a commit hash.
func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

// branch is a ref as users name it: refs/heads/main is main.
func branch(ref string) string { return strings.TrimPrefix(ref, "refs/heads/") }
