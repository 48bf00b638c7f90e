package mcpserver

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/patina-dev/patina/sidecar/client"
)

func (s *server) addGitTools(ms *mcp.Server) {
	addTool(s, ms, &mcp.Tool{
		Name:  "diff",
		Title: "Show a workspace's changes",
		Description: "Show what a repository workspace changed against the commit it started from: committed, uncommitted and new files. " +
			"Lists every changed file with lines added and deleted, then the unified diff (cut when long), and names the commit it shows: " +
			"merge merges exactly what the last diff showed.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)},
	}, s.diff)
	addTool(s, ms, &mcp.Tool{
		Name:  "commit",
		Title: "Commit a workspace's changes",
		Description: "Commit everything changed in a repository workspace (new, modified and deleted files) on its branch patina/<name>. " +
			"The user's checkout is not touched; merge brings the commits back.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(false), OpenWorldHint: ptr(false)},
	}, s.commit)
	addTool(s, ms, &mcp.Tool{
		Name:  "merge",
		Title: "Merge a workspace's branch",
		Description: "Merge exactly one commit of a repository workspace into a branch of the user's repository, " +
			"by default the branch the workspace was created from: the commit named in commit, else the one the last diff showed. " +
			"Without commit it refuses when nothing was diffed yet, when the workspace changed since the diff (call diff again), " +
			"or when the diff held uncommitted changes (call commit first: a commit of exactly what the diff showed keeps it mergeable). " +
			"Fast-forwards when it can. Fails, changing nothing, on a conflict.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(false), OpenWorldHint: ptr(false)},
	}, s.merge)
	addTool(s, ms, &mcp.Tool{
		Name:        "log",
		Title:       "Show a workspace's log",
		Description: "Show a workspace's log: what happened in it, oldest first (creation, commands run with their exit codes, commits, merges).",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)},
	}, s.showLog)
	addTool(s, ms, &mcp.Tool{
		Name:  "apply",
		Title: "Stage a workspace's changes in the user's checkout",
		Description: "Stage a repository workspace's changes, squashed into one, in the user's own working tree (the repository it was made from), " +
			"without committing: the user reviews them with git diff --cached and commits them. Use merge instead to merge the workspace's branch.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(false), OpenWorldHint: ptr(false)},
	}, s.apply)
}

func (s *server) diff(ctx context.Context, in WorkspaceIn) (string, DiffOut, error) {
	if err := required("workspace", in.Workspace, "the workspace's name or id"); err != nil {
		return "", DiffOut{}, err
	}
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	var d client.Diff
	err := s.call(ctx, func(c *client.Client) (err error) {
		d, err = c.Diff(ctx, in.Workspace)
		return err
	})
	if err != nil {
		return "", DiffOut{}, err
	}
	out := DiffOut{Base: d.Base, Commit: d.Commit, Uncommitted: d.Uncommitted, Files: []FileChange{}, Truncated: d.Truncated}
	for _, f := range d.Files {
		out.Files = append(out.Files, FileChange(f))
	}
	if len(d.Files) == 0 && d.Text == "" {
		return fmt.Sprintf("No changes against %s (workspace at commit %s).", short(d.Base), short(d.Commit)), out, nil
	}
	text := d.Text
	if len(text) > s.opts.MaxDiffBytes {
		e := cutOutput([]byte(text), nil, int64(len(text)), s.opts.MaxDiffBytes, 0)
		text, _ = asText(e.Head)
		out.Truncated = true
	}
	out.Diff = text

	var b strings.Builder
	fmt.Fprintf(&b, "%d file%s changed against %s:\n", len(d.Files), plural(len(d.Files)), short(d.Base))
	for _, f := range d.Files {
		b.WriteString("  " + changeLine(f) + "\n")
	}
	if text != "" {
		b.WriteString("\n" + text)
		if !strings.HasSuffix(text, "\n") {
			b.WriteString("\n")
		}
	}
	if out.Truncated {
		b.WriteString("[diff cut short: the file list above is complete; read the files themselves with file_read]\n")
	}
	if d.Uncommitted {
		fmt.Fprintf(&b, "This is commit %s plus uncommitted changes: commit them, then merge.\n", short(d.Commit))
	} else {
		fmt.Fprintf(&b, "This is commit %s: merge merges exactly it.\n", short(d.Commit))
	}
	return strings.TrimSuffix(b.String(), "\n"), out, nil
}

// changeLine summarises a changed file: "M  src/a.go (+3 -1)".
func changeLine(f client.FileStat) string {
	letter := map[string]string{
		"added": "A", "modified": "M", "deleted": "D", "renamed": "R", "copied": "C", "typechange": "T",
	}[f.Status]
	if letter == "" {
		letter = "?"
	}
	name := f.Path
	if f.OldPath != "" && f.OldPath != f.Path {
		name = f.OldPath + " -> " + f.Path
	}
	if f.Binary {
		return fmt.Sprintf("%s  %s (binary)", letter, name)
	}
	return fmt.Sprintf("%s  %s (+%d -%d)", letter, name, f.Added, f.Deleted)
}

func (s *server) commit(ctx context.Context, in CommitIn) (string, CommitOut, error) {
	if err := required("workspace", in.Workspace, "the workspace's name or id"); err != nil {
		return "", CommitOut{}, err
	}
	if strings.TrimSpace(in.Message) == "" {
		return "", CommitOut{}, argErrorf("message is required: say what the change does")
	}
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	var r client.CommitResult
	err := s.call(ctx, func(c *client.Client) (err error) {
		r, err = c.Commit(ctx, in.Workspace, client.CommitRequest{Message: in.Message})
		return err
	})
	if err != nil {
		return "", CommitOut{}, err
	}
	out := CommitOut{Commit: r.Commit, Committed: r.Committed, Reviewed: r.Reviewed}
	text := fmt.Sprintf("Committed %s on the workspace's branch.", short(r.Commit))
	if !r.Committed {
		text = fmt.Sprintf("Nothing to commit: no changes since the last commit (%s).", short(r.Commit))
	}
	if r.Reviewed {
		text += " It is what the last diff showed: merge brings it into the user's branch."
	} else {
		text += " It is not what the last diff showed (or nothing was diffed yet): call diff to see it before merging."
	}
	return text, out, nil
}

func (s *server) merge(ctx context.Context, in MergeIn) (string, MergeOut, error) {
	if err := required("workspace", in.Workspace, "the workspace's name or id"); err != nil {
		return "", MergeOut{}, err
	}
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	var r client.MergeResult
	err := s.call(ctx, func(c *client.Client) (err error) {
		r, err = c.Merge(ctx, in.Workspace, client.MergeRequest{Into: in.Into, Commit: in.Commit})
		return err
	})
	if err != nil {
		return "", MergeOut{}, err
	}
	out := MergeOut(r)
	r.Into = strings.TrimPrefix(r.Into, "refs/heads/")
	var text string
	switch {
	case r.UpToDate:
		text = fmt.Sprintf("Already up to date: %s has commit %s.", r.Into, short(r.Merged))
	case r.FastForward:
		text = fmt.Sprintf("Merged commit %s: fast-forwarded %s from %s to %s.", short(r.Merged), r.Into, short(r.Previous), short(r.Commit))
	default:
		text = fmt.Sprintf("Merged commit %s into %s: merge commit %s (it was at %s).", short(r.Merged), r.Into, short(r.Commit), short(r.Previous))
	}
	if r.Uncommitted {
		text += " Note: the workspace has uncommitted changes, which were not merged: commit them, then merge again."
	}
	return text, out, nil
}

func (s *server) showLog(ctx context.Context, in WorkspaceIn) (string, LogOut, error) {
	if err := required("workspace", in.Workspace, "the workspace's name or id"); err != nil {
		return "", LogOut{}, err
	}
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	var es []client.LogEntry
	err := s.call(ctx, func(c *client.Client) (err error) {
		es, err = c.Log(ctx, in.Workspace)
		return err
	})
	if err != nil {
		return "", LogOut{}, err
	}
	// The sidecar appends some events (commands) after others that came
	// later (commits); show them in the order they happened.
	sort.SliceStable(es, func(i, j int) bool { return es[i].Time.Before(es[j].Time) })
	out := LogOut{Entries: []LogEntry{}, Total: len(es)}
	if len(es) == 0 {
		return "The log is empty.", out, nil
	}
	var b strings.Builder
	if skip := len(es) - s.opts.MaxLogEntries; skip > 0 {
		fmt.Fprintf(&b, "[%d older entries not shown]\n", skip)
		es = es[skip:]
	}
	for _, e := range es {
		out.Entries = append(out.Entries, LogEntry{Time: e.Time.UTC().Format(time.RFC3339), Kind: e.Kind, ExitCode: e.ExitCode, Message: e.Message})
		b.WriteString(e.Line + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n"), out, nil
}

func (s *server) apply(ctx context.Context, in WorkspaceIn) (string, ApplyOut, error) {
	if err := required("workspace", in.Workspace, "the workspace's name or id"); err != nil {
		return "", ApplyOut{}, err
	}
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	var res client.ApplyResult
	err := s.call(ctx, func(c *client.Client) (err error) {
		res, err = c.Apply(ctx, in.Workspace)
		return err
	})
	if err != nil {
		return "", ApplyOut{}, err
	}
	out := ApplyOut{Dir: res.Dir, Files: []string{}}
	for _, f := range res.Files {
		out.Files = append(out.Files, f.Path)
	}
	text := fmt.Sprintf("Staged %d file(s) in %s (not committed): %s", len(out.Files), res.Dir, strings.Join(out.Files, ", "))
	return text, out, nil
}
