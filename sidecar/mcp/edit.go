package mcpserver

import (
	"errors"
	"fmt"
	"strings"
)

// Errors of applyEdit.
var (
	errNoMatch   = errors.New("search string not found")
	errAmbiguous = errors.New("search string found more than once")
)

// edit is the outcome of applyEdit.
type edit struct {
	Content string
	// Match is the 1-based number of the replaced occurrence, Matches how
	// many there are, Line the 1-based line where the replacement starts.
	Match, Matches, Line int
}

// applyEdit replaces one exact occurrence of search in content by replace:
// the only one, or the which-th (1-based; 0 when not given). Occurrences
// are counted left to right without overlapping. The error says why
// nothing was replaced, in words for a model to act on.
func applyEdit(content, search, replace string, which int) (edit, error) {
	switch {
	case search == "":
		return edit{}, errors.New("search must not be empty (to replace a whole file, use file_write)")
	case search == replace:
		return edit{}, errors.New("search and replace are identical: the edit would change nothing")
	case which < 0:
		return edit{}, fmt.Errorf("which_match must be 1 or more, got %d", which)
	}
	at := occurrences(content, search)
	switch {
	case len(at) == 0:
		msg := "search must match the file's text exactly, including whitespace and indentation"
		if hint := nearMiss(content, search); hint != "" {
			msg += "; " + hint
		}
		return edit{}, fmt.Errorf("%w: %s", errNoMatch, msg)
	case which == 0 && len(at) > 1:
		return edit{}, fmt.Errorf("%w: %d times, at lines %s; pass which_match (1 to %d) to pick one, or a longer search string that occurs once",
			errAmbiguous, len(at), lineList(content, at), len(at))
	case which > len(at):
		return edit{}, fmt.Errorf("which_match is %d but the search string occurs %d time%s (at lines %s)",
			which, len(at), plural(len(at)), lineList(content, at))
	}
	n := max(which, 1)
	i := at[n-1]
	return edit{
		Content: content[:i] + replace + content[i+len(search):],
		Match:   n,
		Matches: len(at),
		Line:    lineAt(content, i),
	}, nil
}

// occurrences returns the offsets of search in s, left to right, not
// overlapping.
func occurrences(s, search string) []int {
	var at []int
	for off := 0; ; {
		i := strings.Index(s[off:], search)
		if i < 0 {
			return at
		}
		at = append(at, off+i)
		off += i + len(search)
	}
}

// lineAt is the 1-based line of byte offset i.
func lineAt(s string, i int) int { return strings.Count(s[:i], "\n") + 1 }

// lineList names the lines of offsets, at most ten.
func lineList(s string, at []int) string {
	var parts []string
	for k, i := range at {
		if k == 10 {
			parts = append(parts, fmt.Sprintf("and %d more", len(at)-10))
			break
		}
		parts = append(parts, fmt.Sprint(lineAt(s, i)))
	}
	return strings.Join(parts, ", ")
}

// nearMiss explains why search, not found exactly, nearly matches: line
// endings, or whitespace at the ends of lines. "" when it does not.
func nearMiss(content, search string) string {
	if strings.Contains(content, "\r\n") && !strings.Contains(search, "\r\n") && strings.Contains(search, "\n") {
		if i := strings.Index(content, strings.ReplaceAll(search, "\n", "\r\n")); i >= 0 {
			return fmt.Sprintf("the file has CRLF (\\r\\n) line endings: with them, search matches at line %d", lineAt(content, i))
		}
	}
	want := trimmedLines(strings.Trim(search, "\r\n"))
	if len(want) == 0 || (len(want) == 1 && want[0] == "") {
		return ""
	}
	lines := trimmedLines(content)
	for i := 0; i+len(want) <= len(lines); i++ {
		match := true
		for j, w := range want {
			if j == 0 || j == len(want)-1 {
				// The first and last search lines may be parts of lines.
				if !strings.Contains(lines[i+j], w) {
					match = false
					break
				}
			} else if lines[i+j] != w {
				match = false
				break
			}
		}
		if match {
			return fmt.Sprintf("text matching it apart from indentation or spacing is at line %d: read it with file_read and copy it exactly", i+1)
		}
	}
	return ""
}

func trimmedLines(s string) []string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return lines
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// count picks the singular or the plural form for n.
func count(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
