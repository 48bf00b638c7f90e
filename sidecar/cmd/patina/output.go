package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"
)

// writeJSON prints v as indented JSON (a nil slice as []).
func writeJSON(w io.Writer, v any) error {
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Slice && rv.IsNil() {
		v = reflect.MakeSlice(rv.Type(), 0, 0).Interface()
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeTable prints a header and rows as aligned columns. Cells are made
// one line (see cell).
func writeTable(w io.Writer, header []string, rows [][]string) error {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 3, ' ', 0)
	line := func(cells []string) {
		for i, c := range cells {
			if i > 0 {
				io.WriteString(tw, "\t")
			}
			io.WriteString(tw, cell(c))
		}
		io.WriteString(tw, "\n")
	}
	line(header)
	for _, r := range rows {
		line(r)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := w.Write(trimLines(buf.Bytes()))
	return err
}

// trimLines drops the spaces tabwriter leaves at the end of lines.
func trimLines(b []byte) []byte {
	lines := bytes.SplitAfter(b, []byte("\n"))
	out := make([]byte, 0, len(b))
	for _, l := range lines {
		nl := bytes.HasSuffix(l, []byte("\n"))
		l = bytes.TrimRight(l, " \n")
		out = append(out, l...)
		if nl {
			out = append(out, '\n')
		}
	}
	return out
}

// cell makes s safe for a table cell: control characters (tabs and
// newlines included) become spaces, and an empty cell shows as "-".
func cell(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	if s == "" {
		return "-"
	}
	return s
}

// oneLine returns the first line of s, cut to max runes, with "…" when
// anything was left out.
func oneLine(s string, max int) string {
	s = strings.TrimSpace(s)
	cut := false
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s, cut = strings.TrimSpace(s[:i]), true
	}
	if utf8.RuneCountInString(s) > max {
		s, cut = string([]rune(s)[:max-1]), true
	}
	if cut {
		s += "…"
	}
	return s
}

// ago says how long before now t was, coarsely ("3 minutes ago").
func ago(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t)
	if d < 0 {
		d = 0
	}
	plural := func(n int, unit string) string {
		if n == 1 {
			return fmt.Sprintf("1 %s ago", unit)
		}
		return fmt.Sprintf("%d %ss ago", n, unit)
	}
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return plural(int(d/time.Minute), "minute")
	case d < 48*time.Hour:
		return plural(int(d/time.Hour), "hour")
	default:
		return plural(int(d/(24*time.Hour)), "day")
	}
}

// humanBytes formats a byte count: "512 B", "1.5 KiB", "20 MiB".
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	v := float64(n) / float64(div)
	suffix := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}[exp]
	if v < 10 {
		return fmt.Sprintf("%.1f %s", v, suffix)
	}
	return fmt.Sprintf("%.0f %s", v, suffix)
}

// humanDuration formats a command's duration: "850µs", "12ms", "1.2s", "3m4s".
func humanDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}
