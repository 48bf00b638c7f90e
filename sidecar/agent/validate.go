package agent

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/sidecar/agent/wire"
)

// Everything the agent answers is checked before the sidecar uses it: ids
// against their patterns, sizes and counts against the limits, enums
// against their values. A reply that fails is not repaired, it is refused
// (ErrUnavailable), so a lying agent gets nothing through.

// validator is implemented by result types that can be checked. The
// results of package wire are decoded into this package's types of the
// same structure (execResult for wire.ExecResult, ...), which have the
// checks.
type validator interface {
	validate(outputLimit int) error
}

// The types answers are decoded into are checked: one that lost its
// validate method would be read unchecked, silently.
var _ = []validator{
	(*execResult)(nil), (*oldExecResult)(nil), (*asyncResult)(nil), (*setupResult)(nil),
	(*sessionInfo)(nil), (*sessionInfos)(nil), (*commandInfo)(nil), (*commandInfos)(nil),
	(*fileHead)(nil), (*fileInfos)(nil), (*fileWriteResult)(nil), (*outputHead)(nil),
	(*gitState)(nil), (*gitCommitResult)(nil), (*portDialResult)(nil),
}

// Bounds of free text in replies.
const (
	maxPath    = 4096
	maxCommand = 2 << 20 // command text (the API takes 1 MiB bodies)
	maxNotice  = 16 << 10
	maxName    = 1024
)

func validCommandID(id string) bool {
	if id == "" || len(id) > 20 {
		return false
	}
	for _, r := range id {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func checkText(what, s string, max int) error {
	if len(s) > max {
		return fmt.Errorf("%s is %d bytes (max %d)", what, len(s), max)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s is not valid UTF-8", what)
	}
	return nil
}

func checkCwd(cwd string) error {
	if cwd == "" {
		return nil
	}
	if !strings.HasPrefix(cwd, "/") {
		return fmt.Errorf("cwd %q is not absolute", cwd)
	}
	return checkText("cwd", cwd, maxPath)
}

// validHello checks a hello; oldAgent: the workspace's container was made
// by an earlier patina, whose agent may speak OldProtocol.
func validHello(h *wire.Hello, workspaceID string, oldAgent bool) error {
	if h.WorkspaceID != workspaceID {
		return fmt.Errorf("%w: the agent answered for workspace %q, not %q", ErrUnavailable, wire.CleanText(h.WorkspaceID, 80), workspaceID)
	}
	if h.Protocol != wire.ProtocolVersion && !(oldAgent && h.Protocol == wire.OldProtocol) {
		return fmt.Errorf("%w: the workspace's container was made by another patina, whose agent speaks protocol %d (this sidecar's: %d); fork the workspace, or remove its container and start it, to run this sidecar's agent", ErrUnavailable, h.Protocol, wire.ProtocolVersion)
	}
	if h.Sessions < 0 || h.Live < 0 || h.Live > h.Sessions || h.PID < 0 {
		return fmt.Errorf("%w: impossible counts in hello", ErrUnavailable)
	}
	return checkText("version", h.Version, 256)
}

func checkOutput(o wire.Output, what string, limit int) error {
	switch {
	case o.Size < 0:
		return fmt.Errorf("%s: negative size", what)
	case o.DataLen < 0 || o.TailLen < 0:
		return fmt.Errorf("%s: negative length", what)
	case o.DataLen > limit || o.TailLen > limit:
		return fmt.Errorf("%s: more than %d bytes of head or tail", what, limit)
	case int64(o.DataLen) > o.Size || int64(o.TailLen) > o.Size:
		return fmt.Errorf("%s: more bytes than its size", what)
	case !o.Truncated && o.TailLen > 0:
		return fmt.Errorf("%s: a tail without truncation", what)
	}
	return nil
}

// execResult is a wire.ExecResult that validates.
type execResult wire.ExecResult

func (r *execResult) validate(limit int) error { return validExecResult((*wire.ExecResult)(r), limit) }

func validExecResult(r *wire.ExecResult, limit int) error {
	switch {
	case !validCommandID(r.CommandID):
		return fmt.Errorf("command id %q", wire.CleanText(r.CommandID, 40))
	case r.ExitCode < -1 || r.ExitCode > 255:
		return fmt.Errorf("exit code %d", r.ExitCode)
	}
	if err := checkOutput(r.Stdout, "stdout", limit); err != nil {
		return err
	}
	if err := checkOutput(r.Stderr, "stderr", limit); err != nil {
		return err
	}
	if err := checkText("notice", r.Notice, maxNotice); err != nil {
		return err
	}
	return checkCwd(r.Cwd)
}

// asyncResult is a wire.AsyncResult that validates.
type asyncResult wire.AsyncResult

func (a *asyncResult) validate(int) error {
	if !validCommandID(a.CommandID) {
		return errors.New("command id")
	}
	return nil
}

func validInfo(inf *session.Info) error {
	if session.ValidateID(inf.ID) != nil {
		return fmt.Errorf("session id %q", wire.CleanText(inf.ID, 80))
	}
	switch inf.State {
	case session.StateIdle, session.StateRunning, session.StateEnded, session.StateClosed:
	default:
		return fmt.Errorf("session state %q", wire.CleanText(string(inf.State), 40))
	}
	if inf.Running != "" && !validCommandID(inf.Running) {
		return errors.New("running command id")
	}
	if inf.Commands < 0 || inf.Replacements < 0 {
		return errors.New("negative counts")
	}
	if inf.ExitCode != nil && (*inf.ExitCode < -1 || *inf.ExitCode > 255) {
		return errors.New("exit code")
	}
	if err := checkText("end reason", inf.EndReason, maxNotice); err != nil {
		return err
	}
	return checkCwd(inf.Cwd)
}

// sessionInfo is a session.Info that validates.
type sessionInfo session.Info

func (s *sessionInfo) validate(int) error { return validInfo((*session.Info)(s)) }

type sessionInfos []session.Info

func (s *sessionInfos) validate(int) error {
	if len(*s) > 10_000 {
		return errors.New("too many sessions")
	}
	for i := range *s {
		if err := validInfo(&(*s)[i]); err != nil {
			return err
		}
	}
	return nil
}

func validCommand(ci *session.CommandInfo) error {
	switch {
	case !validCommandID(ci.ID):
		return fmt.Errorf("command id %q", wire.CleanText(ci.ID, 40))
	case ci.StdoutBytes < 0 || ci.StderrBytes < 0:
		return errors.New("negative output size")
	case ci.ExitCode != nil && (*ci.ExitCode < -1 || *ci.ExitCode > 255):
		return errors.New("exit code")
	}
	switch ci.State {
	case session.CommandRunning, session.CommandFinished, session.CommandLost:
	default:
		return fmt.Errorf("command state %q", wire.CleanText(string(ci.State), 40))
	}
	return checkText("command text", ci.Command, maxCommand)
}

type commandInfo session.CommandInfo

func (c *commandInfo) validate(int) error { return validCommand((*session.CommandInfo)(c)) }

type commandInfos []session.CommandInfo

func (c *commandInfos) validate(int) error {
	if len(*c) > wire.MaxHistoryPage {
		return errors.New("too many history records")
	}
	for i := range *c {
		if err := validCommand(&(*c)[i]); err != nil {
			return err
		}
		if i > 0 && !idAfter((*c)[i].ID, (*c)[i-1].ID) {
			return errors.New("history out of order")
		}
	}
	return nil
}

// idAfter reports whether command id a comes after b.
func idAfter(a, b string) bool {
	return len(a) > len(b) || (len(a) == len(b) && a > b)
}

func validFileInfo(fi *wire.FileInfo) error {
	switch {
	case fi.Name == "" || strings.ContainsAny(fi.Name, "/\x00") || len(fi.Name) > maxName:
		return fmt.Errorf("file name %q", wire.CleanText(fi.Name, 80))
	case fi.Size < 0:
		return errors.New("negative file size")
	}
	switch fi.Type {
	case "file", "dir", "symlink", "other":
	default:
		return fmt.Errorf("file type %q", wire.CleanText(fi.Type, 40))
	}
	return nil
}

// fileHead is a wire.FileHead that validates.
type fileHead wire.FileHead

func (f *fileHead) validate(int) error {
	if err := validFileInfo(&f.FileInfo); err != nil {
		return err
	}
	if len(f.Entries) > wire.MaxListEntries {
		return errors.New("too many entries")
	}
	for i := range f.Entries {
		if err := validFileInfo(&f.Entries[i]); err != nil {
			return err
		}
	}
	return nil
}

type fileInfos []wire.FileInfo

func (f *fileInfos) validate(int) error {
	if len(*f) > wire.MaxListEntries {
		return errors.New("too many entries")
	}
	for i := range *f {
		if err := validFileInfo(&(*f)[i]); err != nil {
			return err
		}
	}
	return nil
}

// fileWriteResult is a wire.FileWriteResult that validates.
type fileWriteResult wire.FileWriteResult

func (w *fileWriteResult) validate(int) error {
	if w.Size < 0 {
		return errors.New("negative size")
	}
	return nil
}

// outputHead is a wire.OutputHead that validates.
type outputHead wire.OutputHead

func (o *outputHead) validate(int) error {
	if o.Size < -1 {
		return errors.New("size")
	}
	return nil
}

// validObjectID reports whether id is a full hex object id (SHA-1 or
// SHA-256).
func validObjectID(id string) bool {
	if len(id) != 40 && len(id) != 64 {
		return false
	}
	for _, r := range id {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}

// gitState is a wire.GitState that validates.
type gitState wire.GitState

func (g *gitState) validate(int) error {
	if g.Head != "" && !validObjectID(g.Head) {
		return errors.New("head is not an object id")
	}
	if g.Snapshot != "" && !validObjectID(g.Snapshot) {
		return errors.New("snapshot is not an object id")
	}
	return checkText("branch", g.Branch, 1024)
}

// gitCommitResult is a wire.GitCommitResult that validates.
type gitCommitResult wire.GitCommitResult

func (g *gitCommitResult) validate(int) error {
	if g.Commit != "" && !validObjectID(g.Commit) {
		return errors.New("commit is not an object id")
	}
	return nil
}

// portDialResult is a wire.PortDialResult that validates.
type portDialResult wire.PortDialResult

func (r *portDialResult) validate(int) error {
	if len(r.Addr) > 64 {
		return errors.New("an address over 64 bytes")
	}
	return nil
}

// setupResult is a wire.SetupResult that validates (its warning made
// printable).
type setupResult wire.SetupResult

func (r *setupResult) validate(int) error {
	r.Warning = wire.CleanText(r.Warning, maxNotice)
	return nil
}
