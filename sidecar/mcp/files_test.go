package mcpserver

import (
	"strings"
	"testing"
)

func TestMCPWorkspacePath(t *testing.T) {
	for _, tc := range []struct {
		in, exp string
		expErr  string
	}{
		{in: "", exp: "."},
		{in: ".", exp: "."},
		{in: "a.go", exp: "a.go"},
		{in: "./src/a.go", exp: "src/a.go"},
		{in: "src//a.go", exp: "src/a.go"},
		{in: "/workspace", exp: "."},
		{in: "/workspace/", exp: "."},
		{in: "/workspace/src/a.go", exp: "src/a.go"},
		{in: "/workspace/./src/../a.go", exp: "a.go"},
		{in: "/workspacex/a.go", expErr: "outside /workspace"},
		{in: "/etc/passwd", expErr: "outside /workspace"},
		{in: "/workspace/../etc", expErr: "outside /workspace"},
		{in: "../x", expErr: "leaves /workspace"},
		{in: "src/../../x", expErr: "leaves /workspace"},
		{in: "..", expErr: "leaves /workspace"},
		{in: "a/../b", exp: "b"},
		{in: "name with spaces.txt", exp: "name with spaces.txt"},
	} {
		got, err := workspacePath(tc.in)
		switch {
		case tc.expErr != "" && (err == nil || !strings.Contains(err.Error(), tc.expErr)):
			t.Errorf("workspacePath(%q): exp an error with %q, got %q, %v", tc.in, tc.expErr, got, err)
		case tc.expErr == "" && (err != nil || got != tc.exp):
			t.Errorf("workspacePath(%q): exp %q, got %q, %v", tc.in, tc.exp, got, err)
		}
	}
}

func TestMCPFilePathArgs(t *testing.T) {
	for _, tc := range []struct {
		ws, path, expErr string
	}{
		{ws: "", path: "a", expErr: "workspace is required"},
		{ws: "w", path: "", expErr: "path is required"},
		{ws: "w", path: "/workspace", expErr: "directory itself"},
		{ws: "w", path: ".", expErr: "directory itself"},
		{ws: "w", path: "a"},
	} {
		_, err := filePathArgs(tc.ws, tc.path)
		if (tc.expErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.expErr)) {
			t.Errorf("filePathArgs(%q, %q): exp error %q, got %v", tc.ws, tc.path, tc.expErr, err)
		}
	}
}

func TestMCPViewLines(t *testing.T) {
	five := "one\ntwo\nthree\nfour\nfive\n"
	for _, tc := range []struct {
		name               string
		data               string
		start, end         int
		maxLines, maxBytes int
		expLines           []string
		expStart, expEnd   int
		expTotal           int
		expTrunc           bool
		expErr             string
		expText            []string // parts of render's output
	}{
		{name: "whole file", data: five, expLines: []string{"one", "two", "three", "four", "five"}, expStart: 1, expEnd: 5, expTotal: 5,
			expText: []string{"/workspace/f: lines 1-5 of 5\n     1\tone\n     2\ttwo\n", "     5\tfive"}},
		{name: "range", data: five, start: 2, end: 3, expLines: []string{"two", "three"}, expStart: 2, expEnd: 3, expTotal: 5,
			expText: []string{"lines 2-3 of 5", "     2\ttwo\n     3\tthree"}},
		{name: "end past the end is clamped", data: five, start: 4, end: 99, expLines: []string{"four", "five"}, expStart: 4, expEnd: 5, expTotal: 5},
		{name: "start past the end", data: five, start: 6, expErr: "past the end: the file has 5 lines"},
		{name: "line cap", data: five, maxLines: 2, expLines: []string{"one", "two"}, expStart: 1, expEnd: 2, expTotal: 5, expTrunc: true,
			expText: []string{"[3 more lines: file_read(start_line=3) reads on]"}},
		{name: "byte cap", data: five, maxBytes: 9, expLines: []string{"one", "two"}, expStart: 1, expEnd: 2, expTotal: 5, expTrunc: true},
		{name: "one huge line", data: strings.Repeat("x", 100) + "\nnext\n", maxBytes: 10, expLines: []string{strings.Repeat("x", 10)}, expStart: 1, expEnd: 1, expTotal: 2, expTrunc: true,
			expText: []string{"line 1 continues for 91 more bytes"}},
		{name: "no final newline", data: "a\nb", expLines: []string{"a", "b"}, expStart: 1, expEnd: 2, expTotal: 2,
			expText: []string{"[no newline at end of file]"}},
		{name: "empty", data: "", expText: []string{"is empty (0 lines)"}},
		{name: "empty lines count", data: "\n\n", expLines: []string{"", ""}, expStart: 1, expEnd: 2, expTotal: 2},
		{name: "binary", data: "ELF\x00\x01", expText: []string{"binary file (5 bytes"}},
		{name: "invalid UTF-8", data: "caf\xe9\n", expLines: []string{"caf\uFFFD"}, expStart: 1, expEnd: 1, expTotal: 1,
			expText: []string{"not valid UTF-8"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			maxLines, maxBytes := tc.maxLines, tc.maxBytes
			if maxLines == 0 {
				maxLines = 2000
			}
			if maxBytes == 0 {
				maxBytes = 1 << 20
			}
			v, err := viewLines([]byte(tc.data), tc.start, tc.end, maxLines, maxBytes)
			if tc.expErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.expErr) {
					t.Fatalf("exp error %q, got %v", tc.expErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(v.Lines, "|") != strings.Join(tc.expLines, "|") || v.Start != tc.expStart || v.End != tc.expEnd || v.Total != tc.expTotal || v.Truncated != tc.expTrunc {
				t.Fatalf("exp lines %q %d-%d of %d truncated %v, got %q %d-%d of %d truncated %v",
					tc.expLines, tc.expStart, tc.expEnd, tc.expTotal, tc.expTrunc, v.Lines, v.Start, v.End, v.Total, v.Truncated)
			}
			if len(v.Lines) > 0 && v.LongLine == 0 && !strings.HasPrefix(strings.ReplaceAll(tc.data, "\xe9", "\uFFFD"), v.Content) && tc.start <= 1 {
				t.Fatalf("content %q is not the file's start", v.Content)
			}
			text := v.render("/workspace/f")
			for _, part := range tc.expText {
				if !strings.Contains(text, part) {
					t.Fatalf("exp %q in\n%s", part, text)
				}
			}
		})
	}
}
