package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/patina-dev/patina/sidecar/client"
	"github.com/spf13/cobra"
)

func newWsDiffCmd(a *app) *cobra.Command {
	var stat, asJSON bool
	cmd := &cobra.Command{
		Use:   "diff WS",
		Short: "Show a workspace's changes against its base",
		Long: `Show a workspace's changes against its base: committed, uncommitted and
untracked, as one unified diff (or, with --stat, one line per file).

The diff is of the workspace's HEAD commit (its commits so far) plus its work
not committed yet. Standard error names that commit (with --stat too), in a
line without the "patina: " that marks failures. The sidecar remembers it:
"patina ws merge WS" then merges exactly that commit, and refuses if the
workspace changed since (look again) or if the diff held uncommitted work
(commit it first: "patina ws commit" keeps the review when it commits exactly
what the diff showed). "patina ws merge WS --commit COMMIT" names it instead.
Taking a diff writes nothing to your repository.`,
		Example: `  patina ws diff fix-tests | less
  patina ws diff fix-tests --stat
  patina ws diff fix-tests --json | jq -r '.files[].path'`,
		Args: wsArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				d, err := c.Diff(ctx, args[0])
				if err != nil {
					return err
				}
				if d.Repaired != "" {
					fmt.Fprintf(a.stderr, "patina: note: %s\n", d.Repaired)
				}
				switch {
				case asJSON:
					if d.Files == nil {
						d.Files = []client.FileStat{}
					}
					return writeJSON(a.stdout, d)
				case stat:
					if err := writeDiffStat(a.stdout, d.Files); err != nil {
						return err
					}
				default:
					if _, err := io.WriteString(a.stdout, d.Text); err != nil {
						return err
					}
					if d.Truncated {
						fmt.Fprintf(a.stderr, "note: the diff is longer than the sidecar's limit and was cut; "+
							"see every file with patina ws diff %s --stat, the rest in the workspace (patina exec %s -- git diff)\n", args[0], args[0])
					}
				}
				writeDiffNote(a.stderr, args[0], d)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&stat, "stat", false, "print one line per changed file instead of the diff")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the diff and its per-file summary as JSON")
	return cmd
}

// writeDiffNote says which commit a diff shows and how to merge it.
func writeDiffNote(w io.Writer, ws string, d client.Diff) {
	switch {
	case d.Commit == "":
	case d.Uncommitted:
		fmt.Fprintf(w, "this is commit %s plus uncommitted work, which a merge does not record: "+
			"commit it first (patina ws commit %s -m MESSAGE), then merge (patina ws merge %s)\n", shortCommit(d.Commit), ws, ws)
	default:
		fmt.Fprintf(w, "this is commit %s; patina ws merge %s merges exactly it\n", shortCommit(d.Commit), ws)
	}
}

// writeDiffStat prints a per-file summary of a diff and a total line.
func writeDiffStat(w io.Writer, files []client.FileStat) error {
	rows := make([][]string, 0, len(files))
	var added, deleted int
	for _, f := range files {
		path := f.Path
		if f.OldPath != "" && f.OldPath != f.Path {
			path = f.OldPath + " => " + f.Path
		}
		change := fmt.Sprintf("+%d -%d", f.Added, f.Deleted)
		if f.Binary {
			change = "binary"
		}
		rows = append(rows, []string{f.Status, path, change})
		added += f.Added
		deleted += f.Deleted
	}
	if err := writeTable(w, []string{"STATUS", "PATH", "LINES"}, rows); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%s changed, %s(+), %s(-)\n",
		count(len(files), "file", "files"), count(added, "insertion", "insertions"), count(deleted, "deletion", "deletions"))
	return err
}

// count says "1 file" or "n files".
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func newWsCommitCmd(a *app) *cobra.Command {
	var message, author string
	cmd := &cobra.Command{
		Use:   "commit WS -m MESSAGE",
		Short: "Commit everything in a workspace on its branch",
		Long: `Stage everything in the workspace (changes and untracked files) and commit it on
its branch patina/<name>, and print the commit. Nothing to commit is not an
error.

If the commit records exactly what the last "patina ws diff" showed (the same
files, on the commit it showed), "patina ws merge" takes it as reviewed.
Otherwise (the workspace changed after the diff, or there was no diff) patina
says so on standard error: look at the diff before merging.`,
		Example: `  patina ws commit fix-tests -m "Fix the flaky test"
  patina ws commit fix-tests -m "Add docs" --author "Ada Lovelace <ada@example.com>"`,
		Args: wsArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := commitRequest(message, author)
			if err != nil {
				return err
			}
			return a.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				res, err := c.Commit(ctx, args[0], req)
				if err != nil {
					return err
				}
				if res.Repaired != "" {
					fmt.Fprintf(a.stderr, "patina: note: %s\n", res.Repaired)
				}
				if res.Committed {
					_, err = fmt.Fprintf(a.stdout, "committed %s\n", shortCommit(res.Commit))
				} else {
					_, err = fmt.Fprintf(a.stdout, "nothing to commit: the workspace is at %s\n", shortCommit(res.Commit))
				}
				if err != nil {
					return err
				}
				if !res.Reviewed {
					fmt.Fprintf(a.stderr, "note: %s is not what patina ws diff last showed; look at it (patina ws diff %s) before merging\n",
						shortCommit(res.Commit), args[0])
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVarP(&message, "message", "m", "", "the commit message (required)")
	cmd.Flags().StringVar(&author, "author", "", `the commit's author, "Name <email>" (default: the sidecar's)`)
	return cmd
}

// commitRequest validates commit's flags.
func commitRequest(message, author string) (client.CommitRequest, error) {
	req := client.CommitRequest{Message: message}
	if strings.TrimSpace(message) == "" {
		return req, usagef("a commit message is required (-m MESSAGE)")
	}
	if author != "" {
		name, email, err := parseAuthor(author)
		if err != nil {
			return req, err
		}
		req.AuthorName, req.AuthorEmail = name, email
	}
	return req, nil
}

// parseAuthor splits "Name <email>".
func parseAuthor(s string) (name, email string, err error) {
	s = strings.TrimSpace(s)
	open := strings.LastIndex(s, "<")
	if open < 0 || !strings.HasSuffix(s, ">") {
		return "", "", usagef(`--author %q: want "Name <email>"`, s)
	}
	name = strings.TrimSpace(s[:open])
	email = strings.TrimSpace(s[open+1 : len(s)-1])
	if name == "" || email == "" || strings.ContainsAny(name, "<>") || strings.ContainsAny(email, "<> ") {
		return "", "", usagef(`--author %q: want "Name <email>"`, s)
	}
	return name, email, nil
}

func newWsMergeCmd(a *app) *cobra.Command {
	var into, commit string
	cmd := &cobra.Command{
		Use:   "merge WS",
		Short: "Merge what you reviewed of a workspace into a branch of the repository",
		Long: `Merge exactly one commit of the workspace into a branch of the user's
repository (default: the branch the workspace was created from), and print
which: the commit the last "patina ws diff" showed, or the one --commit names.

Without --commit, the merge is refused (and nothing changes) when nothing was
reviewed yet, when the workspace changed since the diff (new commits: look at
the diff again), or when the diff held uncommitted work (commit it first with
"patina ws commit", which keeps the review when it commits exactly what the
diff showed). With --commit (whole or abbreviated, as ws diff and ws commit
print it), that commit is merged, and it must be on the workspace's branch.

The workspace's HEAD is recorded on patina/<name> first (commits made inside
with git commit included), once their objects are checked; uncommitted work is
never merged. A conflict leaves both branches as they were and fails.`,
		Example: `  patina ws diff fix-tests && patina ws merge fix-tests
  patina ws merge fix-tests --into release-1.2
  patina ws merge fix-tests --commit 3f1c9e2a07   # exactly this commit`,
		Args: wsArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				res, err := c.Merge(ctx, args[0], client.MergeRequest{Into: into, Commit: commit})
				if err != nil {
					return a.mergeError(ctx, c, args[0], into, err)
				}
				if res.Uncommitted {
					fmt.Fprintln(a.stderr, "note: the workspace has uncommitted changes, which were not merged (run `patina ws commit` first)")
				}
				return writeMergeResult(a.stdout, res)
			})
		},
	}
	cmd.Flags().StringVar(&into, "into", "", "the branch to merge into (default: the branch the workspace was created from)")
	cmd.Flags().StringVar(&commit, "commit", "", "merge exactly this commit of the workspace's branch, whole or abbreviated (default: the one ws diff last showed)")
	return cmd
}

// mergeError explains a merge that the sidecar answered "not found" (or,
// for --into, invalid because it names nothing) for a workspace that
// exists: then the branch to merge into is what is missing.
// Other errors pass through.
func (a *app) mergeError(ctx context.Context, c *client.Client, ws, into string, err error) error {
	// The sidecar answers 400 naming the field "into" (it names nothing)
	// or, from an older sidecar, 404.
	var ae *client.APIError
	missingInto := into != "" && errors.As(err, &ae) && ae.Field == "into"
	if !errors.Is(err, client.ErrNotFound) && !missingInto {
		return err
	}
	w, gerr := c.GetWorkspace(ctx, ws)
	if gerr != nil {
		return err // the workspace is missing, as the sidecar's message says
	}
	if into != "" {
		return &messageError{err: err, msg: fmt.Sprintf("merge %s: %s has no branch %q to merge into.\n"+
			"Name a local branch of that repository with --into, or leave --into out to merge into %s.",
			w.Name, w.Repo, into, baseBranchText(w))}
	}
	return &messageError{err: err, msg: fmt.Sprintf("merge %s: %s is no longer in %s.\n"+
		"Name a local branch of that repository to merge into with --into.",
		w.Name, baseBranchText(w), w.Repo)}
}

// baseBranchText names the branch a workspace was created from.
func baseBranchText(w client.Workspace) string {
	if b, ok := strings.CutPrefix(w.Base, "refs/heads/"); ok && b != "" {
		return "the branch it was created from, " + b
	}
	return "the branch it was created from"
}

func writeMergeResult(w io.Writer, r client.MergeResult) error {
	into := strings.TrimPrefix(r.Into, "refs/heads/")
	var err error
	switch {
	case r.UpToDate:
		_, err = fmt.Fprintf(w, "%s already has %s: up to date\n", into, shortCommit(r.Merged))
	case r.FastForward:
		_, err = fmt.Fprintf(w, "merged %s: fast-forwarded %s: %s..%s\n", shortCommit(r.Merged), into, shortCommit(r.Previous), shortCommit(r.Commit))
	default:
		_, err = fmt.Fprintf(w, "merged %s into %s: %s (was %s)\n", shortCommit(r.Merged), into, shortCommit(r.Commit), shortCommit(r.Previous))
	}
	return err
}

func newWsApplyCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "apply WS",
		Short: "Stage a workspace's changes in the repository's working tree",
		Long: `Stage the workspace's changes, squashed into one, in the user's working tree
(the repository the workspace was made from), without committing: review them
with "git diff --cached" and commit them yourself. patina prints one line per
staged file (or, with --json, the directory and the files as JSON).`,
		Example: `  patina ws apply fix-tests && git diff --cached
  patina ws apply fix-tests --json | jq -r '.files[].path'`,
		Args: wsArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				res, err := c.Apply(ctx, args[0])
				if err != nil {
					return err
				}
				switch {
				case asJSON:
					if res.Files == nil {
						res.Files = []client.FileStat{}
					}
					return writeJSON(a.stdout, res)
				case len(res.Files) == 0:
					_, err = fmt.Fprintf(a.stdout, "nothing to apply to %s\n", res.Dir)
					return err
				}
				fmt.Fprintf(a.stdout, "staged in %s:\n", res.Dir)
				return writeDiffStat(a.stdout, res.Files)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the directory and the staged files as JSON")
	return cmd
}

func newWsLogCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "log WS",
		Short: "Show a workspace's log (what was run and done in it)",
		Long: `Show a workspace's log, oldest first: one line per event (creation, commands,
commits, merges...). It is kept in git notes (refs/notes/patina-log) of the
repository, so it survives the sidecar.`,
		Example: `  patina ws log fix-tests
  patina ws log fix-tests --json | jq 'map(select(.kind == "command"))'`,
		Args: wsArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			return query(a, cmd, asJSON, func(ctx context.Context, c *client.Client) ([]client.LogEntry, error) {
				return c.Log(ctx, args[0])
			}, writeLog)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the log as a JSON array")
	return cmd
}

// writeLog prints log entries as a table.
func writeLog(w io.Writer, entries []client.LogEntry) error {
	rows := make([][]string, 0, len(entries))
	for _, e := range entries {
		exit := ""
		if e.ExitCode != nil {
			exit = fmt.Sprint(*e.ExitCode)
		}
		when := ""
		if !e.Time.IsZero() {
			when = e.Time.Local().Format(time.DateTime)
		}
		msg := e.Message
		if e.Kind == "" && msg == "" {
			msg = e.Line // a line not in patina's format
		}
		rows = append(rows, []string{when, e.Kind, exit, oneLine(msg, 100)})
	}
	return writeTable(w, []string{"TIME", "KIND", "EXIT", "MESSAGE"}, rows)
}
