package workspace

import (
	"io/fs"

	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/session/pty"
	"github.com/patina-dev/patina/sidecar/agent"
	"github.com/patina-dev/patina/sidecar/agent/wire"
	"github.com/patina-dev/patina/worktree"
)

// The one place where the answers of what the domain drives (the agent's,
// in session's and its protocol's values; worktree's) become the domain's
// values (results.go), and the domain's requests the agent's.

const maxTerminalSize = pty.MaxSize

func sessionInfo(inf session.Info) SessionInfo {
	return SessionInfo{
		ID:           inf.ID,
		State:        SessionState(inf.State),
		Cwd:          inf.Cwd,
		CreatedAt:    inf.CreatedAt,
		Running:      inf.Running,
		Commands:     inf.Commands,
		ExitCode:     inf.ExitCode,
		EndReason:    inf.EndReason,
		Replacements: inf.Replacements,
		Terminal:     inf.Terminal,
	}
}

func sessionInfos(infs []session.Info) []SessionInfo {
	if infs == nil {
		return nil
	}
	out := make([]SessionInfo, len(infs))
	for i, inf := range infs {
		out[i] = sessionInfo(inf)
	}
	return out
}

func commandInfo(ci session.CommandInfo) CommandInfo {
	return CommandInfo{
		ID:           ci.ID,
		Command:      ci.Command,
		State:        CommandState(ci.State),
		StartedAt:    ci.StartedAt,
		EndedAt:      ci.EndedAt,
		ExitCode:     ci.ExitCode,
		StdoutBytes:  ci.StdoutBytes,
		StderrBytes:  ci.StderrBytes,
		TimedOut:     ci.TimedOut,
		Interrupted:  ci.Interrupted,
		Ended:        ci.Ended,
		Replaced:     ci.Replaced,
		OutputPruned: ci.OutputPruned,
	}
}

func commandInfos(cis []session.CommandInfo) []CommandInfo {
	if cis == nil {
		return nil
	}
	out := make([]CommandInfo, len(cis))
	for i, ci := range cis {
		out[i] = commandInfo(ci)
	}
	return out
}

func (r CreateSessionRequest) agent() wire.CreateSessionRequest {
	return wire.CreateSessionRequest{ID: r.ID, Cwd: r.Cwd, Env: r.Env}
}

func (t *TTY) agent() *session.TTY {
	if t == nil {
		return nil
	}
	return &session.TTY{Rows: t.Rows, Cols: t.Cols, Term: t.Term}
}

// execResult is an agent's result of a command; resumed says its
// workspace was resumed to run it, release gives its output back to the
// budget (nil: already given).
func execResult(res session.ExecResult, resumed bool, release func()) ExecResult {
	return ExecResult{
		CommandID:     res.CommandID,
		ExitCode:      res.ExitCode,
		Stdout:        execOutput(res.Stdout),
		Stderr:        execOutput(res.Stderr),
		TimedOut:      res.TimedOut,
		Interrupted:   res.Interrupted,
		Ended:         res.Ended,
		ShellReplaced: res.ShellReplaced,
		Notice:        res.Notice,
		Cwd:           res.Cwd,
		StartedAt:     res.StartedAt,
		EndedAt:       res.EndedAt,
		Resumed:       resumed,
		release:       release,
	}
}

func execOutput(o session.Output) ExecOutput {
	return ExecOutput{Data: o.Data, Tail: o.Tail, Size: o.Size, Truncated: o.Truncated}
}

func fileInfo(fi wire.FileInfo) FileInfo {
	return FileInfo{Name: fi.Name, Type: fi.Type, Size: fi.Size, Mode: fs.FileMode(fi.Mode), ModTime: fi.ModTime}
}

func fileInfos(fis []wire.FileInfo) []FileInfo {
	if fis == nil {
		return nil
	}
	out := make([]FileInfo, len(fis))
	for i, fi := range fis {
		out[i] = fileInfo(fi)
	}
	return out
}

func fileWriteResult(r wire.FileWriteResult) FileWriteResult {
	return FileWriteResult{Size: r.Size, Created: r.Created}
}

func file(f *agent.File) *File {
	if f == nil {
		return nil
	}
	return &File{ReadCloser: f.ReadCloser, Info: fileInfo(f.Info)}
}

func outputStream(o *agent.OutputStream) *OutputStream {
	if o == nil {
		return nil
	}
	return &OutputStream{ReadCloser: o.ReadCloser, Size: o.Size}
}

func fileStats(fss []worktree.FileStat) []FileStat {
	if fss == nil {
		return nil
	}
	out := make([]FileStat, len(fss))
	for i, f := range fss {
		out[i] = FileStat{Path: f.Path, OldPath: f.OldPath, Status: FileStatus(f.Status), Added: f.Added, Deleted: f.Deleted, Binary: f.Binary}
	}
	return out
}

func diffResult(d worktree.Diff, repaired string) DiffResult {
	return DiffResult{
		Base: d.Base, Commit: d.Commit, Tree: d.Tree, Text: d.Text, Truncated: d.Truncated,
		Files: fileStats(d.Files), FilesTruncated: d.FilesTruncated, Uncommitted: d.Uncommitted, Repaired: repaired,
	}
}

func mergeResult(r worktree.MergeResult, uncommitted bool) MergeResult {
	return MergeResult{
		Into: r.Into, Previous: r.Previous, Commit: r.Commit, Merged: r.Merged,
		FastForward: r.FastForward, UpToDate: r.UpToDate, Uncommitted: uncommitted,
	}
}

func applyResult(r worktree.ApplyResult) ApplyResult {
	return ApplyResult{Dir: r.Dir, Tree: r.Tree, Files: fileStats(r.Files)}
}

func logEntries(evs []worktree.Event) []LogEntry {
	if evs == nil {
		return nil
	}
	out := make([]LogEntry, len(evs))
	for i, ev := range evs {
		out[i] = LogEntry{Time: ev.Time, Kind: ev.Kind, ExitCode: ev.ExitCode, Message: ev.Message, Line: ev.String()}
	}
	return out
}
