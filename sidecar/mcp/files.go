package mcpserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/patina-dev/patina/sidecar/client"
)

// mountPoint is where a workspace's files are in its container.
const mountPoint = "/workspace"

func (s *server) addFileTools(ms *mcp.Server) {
	addTool(s, ms, &mcp.Tool{
		Name:  "file_read",
		Title: "Read a file",
		Description: "Read a text file of a workspace. The answer has a header line, then the lines numbered like `cat -n` " +
			"(line number, a tab, the line); the numbers are not part of the file, so leave them out of file_edit's search. " +
			"Up to 2000 lines per call: pass start_line and end_line for a range. Binary files are not shown.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)},
	}, s.fileRead)
	addTool(s, ms, &mcp.Tool{
		Name:  "file_write",
		Title: "Write a file",
		Description: "Write a file of a workspace with the given content, replacing it if it exists (atomically: readers never see half a file) " +
			"and creating missing parent directories. For a small change to an existing file, file_edit is shorter.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, s.fileWrite)
	addTool(s, ms, &mcp.Tool{
		Name:  "file_edit",
		Title: "Edit a file",
		Description: "Replace one exact occurrence of search with replace in a file of a workspace. search must match the file exactly, " +
			"whitespace and indentation included (copy it from file_read without the line numbers). " +
			"If it occurs more than once, the edit fails and lists where: pass which_match, or a longer search that occurs once. " +
			"If it does not occur, the edit fails: read the file again. The file is rewritten atomically.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)},
	}, s.fileEdit)
	addTool(s, ms, &mcp.Tool{
		Name:        "file_list",
		Title:       "List a directory",
		Description: "List a directory of a workspace (default /workspace): names, with a trailing / for directories, and sizes. Not recursive; for a tree use run with find or ls -R.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)},
	}, s.fileList)
	addTool(s, ms, &mcp.Tool{
		Name:        "file_delete",
		Title:       "Delete a file",
		Description: "Delete a file of a workspace, or a directory with everything in it.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, s.fileDelete)
}

// workspacePath turns a path a model gives into one relative to
// /workspace, as the files API wants: "src/a.go", "./src/a.go" and
// "/workspace/src/a.go" are the same file; "." is /workspace itself. Other
// absolute paths are refused: the files API reaches only the workspace's
// directory.
func workspacePath(p string) (string, error) {
	if p == "" {
		return ".", nil
	}
	if strings.HasPrefix(p, "/") {
		c := path.Clean(p)
		switch {
		case c == mountPoint:
			return ".", nil
		case strings.HasPrefix(c, mountPoint+"/"):
			return c[len(mountPoint)+1:], nil
		}
		return "", argErrorf("path %s is outside %s: the file tools reach only the workspace's files (under %s); for other paths use run (cat, ls, ...)", p, mountPoint, mountPoint)
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", argErrorf("path %s leaves %s: give a path inside it", p, mountPoint)
	}
	return c, nil
}

// displayPath is how a model sees a path: absolute, in the container.
func displayPath(rel string) string {
	if rel == "." {
		return mountPoint
	}
	return mountPoint + "/" + rel
}

// filePathArgs checks a file tool's workspace and path; the path must name
// something other than /workspace itself.
func filePathArgs(ws, p string) (string, error) {
	if err := required("workspace", ws, "the workspace's name or id"); err != nil {
		return "", err
	}
	if err := required("path", p, "the file's path, relative to /workspace"); err != nil {
		return "", err
	}
	rel, err := workspacePath(p)
	if err != nil {
		return "", err
	}
	if rel == "." {
		return "", argErrorf("path %s is the workspace's directory itself: name a file in it", p)
	}
	return rel, nil
}

func (s *server) fileRead(ctx context.Context, in FileReadIn) (string, FileReadOut, error) {
	rel, err := filePathArgs(in.Workspace, in.Path)
	if err != nil {
		return "", FileReadOut{}, err
	}
	switch {
	case in.StartLine < 0:
		return "", FileReadOut{}, argErrorf("start_line must be 1 or more, got %d", in.StartLine)
	case in.EndLine < 0:
		return "", FileReadOut{}, argErrorf("end_line must be 1 or more, got %d", in.EndLine)
	case in.EndLine > 0 && in.EndLine < max(in.StartLine, 1):
		return "", FileReadOut{}, argErrorf("end_line (%d) is before start_line (%d)", in.EndLine, in.StartLine)
	}
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	data, err := s.readFile(ctx, in.Workspace, rel)
	if err != nil {
		return "", FileReadOut{}, err
	}
	v, err := viewLines(data, in.StartLine, in.EndLine, s.opts.MaxReadLines, s.opts.MaxReadBytes)
	if err != nil {
		return "", FileReadOut{}, err
	}
	out := FileReadOut{
		Path: displayPath(rel), Content: v.Content, StartLine: v.Start, EndLine: v.End,
		TotalLines: v.Total, Size: int64(len(data)), Truncated: v.Truncated, Binary: v.Binary,
	}
	return v.render(out.Path), out, nil
}

// lineView is the part of a file file_read shows.
type lineView struct {
	Lines      []string // the lines shown, without their newlines
	Content    string   // the same, exactly as in the file
	Start, End int      // 1-based, inclusive; 0 when no lines
	Total      int
	Truncated  bool // stopped before End or the file's end to stay short
	// LongLine: the one line shown was cut (MaxReadBytes).
	LongLine    int
	Binary      bool
	Size        int
	NoEOL       bool // the file does not end with a newline
	InvalidUTF8 bool
}

// viewLines picks lines start..end (1-based, 0: the defaults) of data, at
// most maxLines and about maxBytes of them.
func viewLines(data []byte, start, end, maxLines, maxBytes int) (lineView, error) {
	v := lineView{Size: len(data)}
	if bytes.IndexByte(data, 0) >= 0 {
		v.Binary = true
		return v, nil
	}
	text, bad := asText(data)
	v.InvalidUTF8 = bad
	lines := strings.SplitAfter(text, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	v.Total = len(lines)
	v.NoEOL = len(text) > 0 && !strings.HasSuffix(text, "\n")
	if start == 0 {
		start = 1
	}
	if v.Total == 0 {
		if start > 1 {
			return v, argErrorf("start_line %d is past the end: the file is empty", start)
		}
		return v, nil
	}
	if start > v.Total {
		return v, argErrorf("start_line %d is past the end: the file has %d line%s", start, v.Total, plural(v.Total))
	}
	last := v.Total
	if end > 0 {
		last = min(end, v.Total)
	}
	var content strings.Builder
	for i := start; i <= last; i++ {
		l := lines[i-1]
		if i-start == maxLines || (i > start && content.Len()+len(l) > maxBytes) {
			v.Truncated = true
			break
		}
		if i == start && len(l) > maxBytes {
			// One huge line: show its start.
			cut := len(cutRuneEnd([]byte(l[:maxBytes])))
			v.LongLine = len(l) - cut
			l = l[:cut]
		}
		content.WriteString(l)
		v.Lines = append(v.Lines, strings.TrimSuffix(l, "\n"))
		v.End = i
		if v.LongLine > 0 {
			v.Truncated = i < last
			break
		}
	}
	v.Start = start
	v.Content = content.String()
	return v, nil
}

// render formats a view for a model: a header, then numbered lines.
func (v lineView) render(p string) string {
	var b strings.Builder
	switch {
	case v.Binary:
		fmt.Fprintf(&b, "%s is a binary file (%d bytes, contains NUL bytes): not shown. Inspect it with run (e.g. `file`, `xxd %s | head`).", p, v.Size, p)
		return b.String()
	case v.Total == 0:
		fmt.Fprintf(&b, "%s is empty (0 lines).", p)
		return b.String()
	}
	fmt.Fprintf(&b, "%s: lines %d-%d of %d\n", p, v.Start, v.End, v.Total)
	for i, l := range v.Lines {
		fmt.Fprintf(&b, "%6d\t%s\n", v.Start+i, l)
	}
	if v.LongLine > 0 {
		fmt.Fprintf(&b, "[line %d continues for %d more bytes; read it with run, e.g. cut or fold]\n", v.End, v.LongLine)
	}
	switch {
	case v.Truncated:
		fmt.Fprintf(&b, "[%d more lines: file_read(start_line=%d) reads on]\n", v.Total-v.End, v.End+1)
	case v.End == v.Total && v.NoEOL:
		b.WriteString("[no newline at end of file]\n")
	}
	if v.InvalidUTF8 {
		b.WriteString("Note: the file is not valid UTF-8: invalid bytes are shown as \uFFFD, which file_edit's search cannot match (file_edit leaves them as they are elsewhere).\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func (s *server) fileWrite(ctx context.Context, in FileWriteIn) (string, FileWriteOut, error) {
	rel, err := filePathArgs(in.Workspace, in.Path)
	if err != nil {
		return "", FileWriteOut{}, err
	}
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	err = s.call(ctx, func(c *client.Client) error {
		return c.WriteFile(ctx, in.Workspace, rel, []byte(in.Content))
	})
	if err != nil {
		return "", FileWriteOut{}, err
	}
	out := FileWriteOut{Path: displayPath(rel), Bytes: len(in.Content), Lines: countLines(in.Content)}
	return fmt.Sprintf("Wrote %s: %d bytes, %d line%s.", out.Path, out.Bytes, out.Lines, plural(out.Lines)), out, nil
}

// countLines counts lines as file_read numbers them.
func countLines(s string) int {
	n := strings.Count(s, "\n")
	if s != "" && !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}

func (s *server) fileEdit(ctx context.Context, in FileEditIn) (string, FileEditOut, error) {
	rel, err := filePathArgs(in.Workspace, in.Path)
	if err != nil {
		return "", FileEditOut{}, err
	}
	if in.WhichMatch < 0 {
		return "", FileEditOut{}, argErrorf("which_match must be 1 or more, got %d", in.WhichMatch)
	}
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	data, err := s.readFile(ctx, in.Workspace, rel)
	if err != nil {
		return "", FileEditOut{}, err
	}
	if bytes.IndexByte(data, 0) >= 0 {
		return "", FileEditOut{}, fmt.Errorf("%s is a binary file (it contains NUL bytes): file_edit edits text; use file_write or run", displayPath(rel))
	}
	e, err := applyEdit(string(data), in.Search, in.Replace, in.WhichMatch)
	if err != nil {
		return "", FileEditOut{}, fmt.Errorf("%s: %w", displayPath(rel), err)
	}
	err = s.call(ctx, func(c *client.Client) error {
		return c.WriteFile(ctx, in.Workspace, rel, []byte(e.Content))
	})
	if err != nil {
		return "", FileEditOut{}, err
	}
	out := FileEditOut{Path: displayPath(rel), Match: e.Match, Matches: e.Matches, Line: e.Line, Bytes: len(e.Content)}
	var b strings.Builder
	fmt.Fprintf(&b, "Edited %s: replaced occurrence %d of %d at line %d.", out.Path, e.Match, e.Matches, e.Line)
	// Show the edited region with a little context.
	first := max(e.Line-3, 1)
	last := e.Line + countLines(in.Replace) + 2
	if v, err := viewLines([]byte(e.Content), first, last, 40, 8<<10); err == nil && len(v.Lines) > 0 {
		fmt.Fprintf(&b, " Lines %d-%d now:\n", v.Start, v.End)
		for i, l := range v.Lines {
			fmt.Fprintf(&b, "%6d\t%s\n", v.Start+i, l)
		}
	}
	return strings.TrimSuffix(b.String(), "\n"), out, nil
}

func (s *server) fileList(ctx context.Context, in FileListIn) (string, FileListOut, error) {
	if err := required("workspace", in.Workspace, "the workspace's name or id"); err != nil {
		return "", FileListOut{}, err
	}
	rel, err := workspacePath(in.Path)
	if err != nil {
		return "", FileListOut{}, err
	}
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	var fis []client.FileInfo
	err = s.call(ctx, func(c *client.Client) (err error) {
		fis, err = c.ListDir(ctx, in.Workspace, rel)
		return err
	})
	if err != nil {
		return "", FileListOut{}, s.notFound(ctx, in.Workspace, "no such directory: "+rel, err)
	}
	out := FileListOut{Path: displayPath(rel), Entries: []FileEntry{}, Total: len(fis)}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d %s\n", out.Path, len(fis), count(len(fis), "entry", "entries"))
	for i, fi := range fis {
		if i == s.opts.MaxListEntries {
			out.Truncated = true
			fmt.Fprintf(&b, "[%d more entries not listed; use run with ls or find]\n", len(fis)-i)
			break
		}
		out.Entries = append(out.Entries, FileEntry{Name: fi.Name, Type: fi.Type, Size: fi.Size, Mode: fi.Mode})
		switch fi.Type {
		case "dir":
			fmt.Fprintf(&b, "%s/\n", fi.Name)
		case "file":
			fmt.Fprintf(&b, "%s  (%d bytes)\n", fi.Name, fi.Size)
		case "symlink":
			fmt.Fprintf(&b, "%s@  (symlink)\n", fi.Name)
		default:
			fmt.Fprintf(&b, "%s  (%s)\n", fi.Name, fi.Type)
		}
	}
	return strings.TrimSuffix(b.String(), "\n"), out, nil
}

func (s *server) fileDelete(ctx context.Context, in FileDeleteIn) (string, FileDeleteOut, error) {
	rel, err := filePathArgs(in.Workspace, in.Path)
	if err != nil {
		return "", FileDeleteOut{}, err
	}
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	err = s.call(ctx, func(c *client.Client) error {
		return c.DeleteFile(ctx, in.Workspace, rel)
	})
	if err != nil {
		return "", FileDeleteOut{}, s.notFound(ctx, in.Workspace, "no such file: "+rel, err)
	}
	return "Deleted " + displayPath(rel) + ".", FileDeleteOut{Path: displayPath(rel)}, nil
}

// readFile reads a workspace file through the sidecar.
func (s *server) readFile(ctx context.Context, ws, rel string) (data []byte, err error) {
	err = s.call(ctx, func(c *client.Client) error {
		data, err = c.ReadFile(ctx, ws, rel)
		return err
	})
	if err != nil {
		return nil, s.notFound(ctx, ws, "no such file: "+rel, err)
	}
	return data, nil
}

// notFound gives a files API not_found error the message msg ("no such
// file: a.txt") in place of the system call's ("statat a.txt: no such file
// or directory") when the file is what is missing. The sidecar answers
// not_found for a missing workspace too; asking for the workspace tells
// the two apart without reading messages.
func (s *server) notFound(ctx context.Context, ws, msg string, err error) error {
	if !errors.Is(err, client.ErrNotFound) {
		return err
	}
	werr := s.call(ctx, func(c *client.Client) error {
		_, err := c.GetWorkspace(ctx, ws)
		return err
	})
	if werr != nil {
		return err
	}
	return &client.APIError{Status: http.StatusNotFound, Code: client.CodeNotFound, Message: msg}
}
