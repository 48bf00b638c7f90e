package workspace

import (
	"io/fs"
	"reflect"
	"testing"
	"time"

	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/sidecar/agent/wire"
	"github.com/patina-dev/patina/worktree"
)

// Each of the domain's values has every field of what it is made from
// (a field added there and not here would be lost on the way).
func TestResultsHaveTheirSourcesFields(t *testing.T) {
	pairs := []struct{ from, to any }{
		{session.Info{}, SessionInfo{}},
		{session.CommandInfo{}, CommandInfo{}},
		{session.ExecResult{}, ExecResult{}},
		{session.Output{}, ExecOutput{}},
		{session.TTY{}, TTY{}},
		{wire.CreateSessionRequest{}, CreateSessionRequest{}},
		{wire.FileInfo{}, FileInfo{}},
		{wire.FileWriteResult{}, FileWriteResult{}},
		{worktree.FileStat{}, FileStat{}},
		{worktree.Diff{}, DiffResult{}},
		{worktree.MergeResult{}, MergeResult{}},
		{worktree.ApplyResult{}, ApplyResult{}},
		{worktree.Event{}, LogEntry{}},
		{worktree.Signature{}, Signature{}},
	}
	for _, p := range pairs {
		from, to := reflect.TypeOf(p.from), reflect.TypeOf(p.to)
		for i := range from.NumField() {
			if f := from.Field(i); f.IsExported() {
				if _, ok := to.FieldByName(f.Name); !ok {
					t.Errorf("%s has no field %s of %s", to, f.Name, from)
				}
			}
		}
	}
}

func TestConvert(t *testing.T) {
	code := 3
	evs := logEntries([]worktree.Event{{Time: time.Date(2025, 11, 21, 5, 0, 0, 0, time.UTC), Kind: worktree.EventCommand, ExitCode: &code, Message: "go test"}})
	if exp := "2025-11-21T05:00:00Z command (exit 3): go test"; len(evs) != 1 || evs[0].Line != exp || *evs[0].ExitCode != 3 {
		t.Fatalf("exp one entry %q, got %+v", exp, evs)
	}
	fi := fileInfo(wire.FileInfo{Name: "x", Type: "file", Size: 2, Mode: uint32(fs.ModeDir | 0o755)})
	if exp := "drwxr-xr-x"; fi.Mode.String() != exp {
		t.Fatalf("exp mode %s, got %s", exp, fi.Mode)
	}
	released := false
	res := execResult(session.ExecResult{CommandID: "7", ExitCode: 1, Stdout: session.Output{Data: []byte("o"), Size: 1},
		StartedAt: time.Unix(1, 0), EndedAt: time.Unix(3, 0)}, true, func() { released = true })
	if res.CommandID != "7" || res.ExitCode != 1 || string(res.Stdout.Data) != "o" || !res.Resumed || res.Duration() != 2*time.Second {
		t.Fatalf("got %+v", res)
	}
	res.Release()
	if !released {
		t.Fatal("exp Release to give the output back")
	}
	if file(nil) != nil || outputStream(nil) != nil || (*TTY)(nil).agent() != nil {
		t.Fatal("exp nil for nil")
	}
}
